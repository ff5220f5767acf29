#!/usr/bin/env python3
"""exact_sum_cost.py — what an all-reduce independent of the world size would cost (issue 36,
item 4; docs/PERF.md "A sum independent of the world size: measured, not built").

Each candidate's wire traffic is an all-reduce the library already has (a native type and
op), so it is measured, not modelled: per user size S (bytes of the user's buffer) it runs,
in interleaved rounds (each a fresh launch, CHORUS_REPRODUCIBLE=1 throughout):
  f32 / f16 / bf16 sum at S          the rank-order mode, the baseline
  f16 exact     float64 sum at 4 S   (float16 widened to float64: exact up to 8192 ranks)
  f32 2-pass    uint8 max at S/4, then int64 sum at 2 S
  bf16 2-pass   uint8 max at S/2, then int32 sum at 2 S
  f32 binned    int64 sum at 8 S     (stands in for the 28 bytes per element of an index and
                                      three int64 bins, a custom op no type has: a bound on
                                      the bytes, not the op; see the note in the table)
and prints per S the median time of each (µs, out of place) and its ratio to the baseline of
its type. The local steps (to the wire format and back, once per element) are not in these
times: perf/exact_sum_cost.cc measures them, and docs/PERF.md adds them.

Usage: perf/exact_sum_cost.py BUILD_DIR shm2|shm4|tcp2x2 [SIZE...]
  env ROUNDS=3, SIZES default "8 64K 1M 128M"; CLUSTER=rexact2x2 SUBNET=10.86.0 (tcp)
  Memory: at 128 MiB the float64 and int64 buffers are 512 MiB a rank (send and receive).
"""
import csv
import os
import statistics
import subprocess
import sys
import tempfile

from repro_cost_table import size_name  # the same size names as the repro tables

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


# (name, [(datatype, op, bytes as a multiple of S)], the baseline's name)
CANDIDATES = [
    ("f32", [("float", "sum", 1)], None),
    ("f16", [("half", "sum", 1)], None),
    ("bf16", [("bfloat16", "sum", 1)], None),
    ("f16 exact (f64)", [("double", "sum", 4)], "f16"),
    ("f32 2-pass", [("uint8", "max", 0.25), ("int64", "sum", 2)], "f32"),
    ("bf16 2-pass", [("uint8", "max", 0.5), ("int32", "sum", 2)], "bf16"),
    ("f32 binned (bytes)", [("int64", "sum", 8)], "f32"),
]


def iters(nbytes):
    if nbytes <= 64 << 10:
        return ["-n", "200", "-w", "20"]
    if nbytes <= 16 << 20:
        return ["-n", "20", "-w", "3"]
    return ["-n", "5", "-w", "1"]


def launcher(build, where):
    run = os.path.join(build, "tools/chorusrun/chorusrun")
    if where in ("shm2", "shm4"):
        return [run, "-np", where[3:]]
    h0, h1 = os.environ["CHORUS_CLUSTER_HOSTS"].split()
    return [os.path.join(SRC, "tools/cluster"), "exec", "--name", os.environ["CHORUS_CLUSTER_NAME"],
            h0, "--", run, "-H", f"{h0}:2,{h1}:2", "--launch-agent",
            os.environ["CHORUS_CLUSTER_AGENT_EXE"]]


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in ("shm2", "shm4", "tcp2x2"):
        sys.exit(__doc__)
    build, where = os.path.abspath(sys.argv[1]), sys.argv[2]
    if where.startswith("tcp") and not os.environ.get("CHORUS_CLUSTER_NAME"):
        os.execv(os.path.join(SRC, "tools/cluster"),
                 [os.path.join(SRC, "tools/cluster"), "run", "-q", "--name",
                  os.environ.get("CLUSTER", "rexact2x2"), "--subnet",
                  os.environ.get("SUBNET", "10.86.0"), "--hosts", "2", "--force", "--",
                  sys.executable, os.path.abspath(__file__)] + sys.argv[1:])
    sizes = [parse_size(s) for s in (sys.argv[3:] or "8 64K 1M 128M".split())]
    rounds = int(os.environ.get("ROUNDS", "3"))
    perf = os.path.join(build, "perf/all_reduce_perf")
    times = {}  # (S, candidate) -> [µs per round]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for s in sizes:
                for name, steps, _ in CANDIDATES:
                    total = 0.0
                    for dtype, op, mult in steps:
                        nbytes = max(1, int(s * mult))
                        out = os.path.join(tmp, "t.csv")
                        cmd = launcher(build, where) + [
                            "-x", "CHORUS_REPRODUCIBLE=1", perf, "-b", str(nbytes), "-e",
                            str(nbytes), "-d", dtype, "-o", op, "-c", "0", "--csv", out
                        ] + iters(nbytes)
                        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                        rows = [row for row in csv.reader(open(out)) if row[0] != "collective"]
                        total += float(next(row[9] for row in rows if row[8] == "out-of-place"))
                    times.setdefault((s, name), []).append(total)
            print(f"[exact_sum_cost] {where} round {r + 1}/{rounds} done", file=sys.stderr)
    load = open("/proc/loadavg").read().split()[:3]
    print(f"# {where}, {rounds} rounds, medians, out of place, µs; load average {' '.join(load)}"
          " at the end")
    print("| size | candidate | time | baseline | ratio |")
    print("|---|---|---|---|---|")
    for s in sizes:
        for name, _, base in CANDIDATES:
            t = statistics.median(times[(s, name)])
            if base is None:
                print(f"| {size_name(s)} | {name} (rank order) | {t:.2f} | | |")
            else:
                b = statistics.median(times[(s, base)])
                print(f"| {size_name(s)} | {name} | {t:.2f} | {b:.2f} | {t / b:.2f} |")


if __name__ == "__main__":
    main()
