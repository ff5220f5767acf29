#!/usr/bin/env python3
"""Merges chorus-train's per-rank Chrome traces into one file and measures the pipeline
bubble (docs/TRAINER.md).

usage: pipeline_trace.py OUT.json TRACE_RANK0.json TRACE_RANK1.json ... [--skip N]

Every rank's timestamps are on the host's monotonic clock, so the merged file shows all
stages on one time line (open it in chrome://tracing or Perfetto). For each rank and each
step after the first N (default 2, warm-up), the step's time is from its first forward's
start to the end of its optimizer step; the bubble is the part of it not spent in forward
or backward spans (waiting for a neighbour, sending, receiving, the optimizer step). Prints
the median bubble fraction per rank next to the GPipe ideal (S-1)/(M+S-1).
"""
import json
import statistics
import sys


def main():
    args = sys.argv[1:]
    skip = 2
    if "--skip" in args:
        i = args.index("--skip")
        skip = int(args[i + 1])
        del args[i:i + 2]
    if len(args) < 2:
        print(__doc__)
        return 2
    out, inputs = args[0], args[1:]
    merged = []
    stages = len(inputs)
    for path in inputs:
        events = json.load(open(path))["traceEvents"]
        merged += events
        spans = [e for e in events if e.get("ph") == "X"]
        label = [e for e in events if e.get("name") == "process_name"][0]["args"]["name"]
        steps = sorted({e["args"]["step"] for e in spans
                        if e["name"] in ("forward", "backward")})
        opt = sorted((e for e in spans if e["name"] == "optimizer step"), key=lambda e: e["ts"])
        fractions, micro = [], 0
        for k, step in enumerate(steps):
            if k < skip or k >= len(opt):
                continue
            work = [e for e in spans if e["name"] in ("forward", "backward")
                    and e["args"]["step"] == step]
            micro = max(e["args"]["micro"] for e in work) + 1
            start = min(e["ts"] for e in work)
            end = opt[k]["ts"] + opt[k]["dur"]
            busy = sum(e["dur"] for e in work)
            fractions.append(1.0 - busy / (end - start))
        if fractions:
            ideal = (stages - 1) / (micro + stages - 1)
            print(f"{label}: bubble {100 * statistics.median(fractions):.1f}% of the step "
                  f"(median of {len(fractions)} steps; ideal (S-1)/(M+S-1) = {100 * ideal:.1f}%, "
                  f"S={stages}, M={micro})")
    with open(out, "w") as f:
        json.dump({"displayTimeUnit": "ms", "traceEvents": merged}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
