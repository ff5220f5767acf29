"""ddp_step_bench.py --profile DIR: where a DDP step's time goes, per rank, per backend.

For each DDP model of the run, after its timed rounds, every rank runs --profile-steps more
steps of each backend (gloo's, then chorus's, one rank's steps after a barrier) under
torch.profiler and writes one chrome trace per backend and rank,
DIR/<mode>_<model>_<backend>_rank<R>.json (open in chrome://tracing or ui.perfetto.dev).
Each step is cut into named regions, which are in the trace and timed by the benchmark:

  ddp_step.zero_grad, ddp_step.forward   the caller's thread, before backward()
  ddp_step.backward                      backward() from call to return, holding:
    ddp_step.comm_wait                   from the moment the last parameter's gradient is
                                         accumulated (its post-accumulate-grad hook) to the
                                         return of backward(): DDP launches the last bucket's
                                         all-reduce and its finalize waits for every
                                         bucket's; nothing is computed any more
                                         ("of which peer lag": the part of it before the
                                         slowest rank had its own last gradient, which no
                                         backend can shorten; "of which DDP copies": DDP's
                                         scaling of the last gradient into its bucket and
                                         copies of the reduced buckets back into .grad)
  ddp_step.optimizer                     SGD's step

"backward compute" below is ddp_step.backward less ddp_step.comm_wait: the gradient
computation, with the earlier buckets' all-reduces overlapping it (their launches included).
"CPU ms" is the backend's own threads' CPU time over the step (as in the timed table). The
bucket all-reduces themselves appear in the trace as the c10d::allreduce_ calls DDP makes on
the caller's thread; the backends' threads run no torch operator, so their work shows only
through comm_wait and the CPU column.
"""
import os
import statistics
import time

# What the table shows per step (seconds; "cpu" in ns): "compute" is backward less comm_wait;
# "lag" the part of comm_wait before the slowest rank had its last gradient; "copies" DDP's
# own work inside comm_wait (read from the trace: DDP_COPIES).
COLUMNS = ("step", "zero_grad", "forward", "compute", "comm_wait", "lag", "copies", "optimizer",
           "cpu")
# DDP's work on the caller's thread after the last gradient: scaling the last gradient into
# its bucket, and copying every reduced bucket back into the parameters' .grad.
DDP_COPIES = ("torch::distributed::reducer::mul_out",
              "torch.distributed.ddp.reducer::copy_bucket_to_grad")


class LastGradientMark:
    """Opens the ddp_step.comm_wait region when the step's last parameter gradient is ready."""

    def __init__(self, model):
        import torch

        self.params = [p for p in model.parameters() if p.requires_grad]
        self.handles = [p.register_post_accumulate_grad_hook(self._ready) for p in self.params]
        self.record = torch.autograd.profiler.record_function
        self.reset()

    def reset(self):
        self.ready = 0
        self.at = None
        self.region = None

    def _ready(self, _param):
        self.ready += 1
        if self.ready == len(self.params):
            self.at = time.perf_counter()
            self.region = self.record("ddp_step.comm_wait")
            self.region.__enter__()

    def close_region(self):
        """Called on the caller's thread when backward() returned."""
        if self.region is not None:
            self.region.__exit__(None, None, None)
            self.region = None

    def remove(self):
        for h in self.handles:
            h.remove()


def profile_backend(model, opt, batches, barrier, latest, cpu_now, steps, trace_path):
    """Runs `steps` profiled steps; returns the medians of COLUMNS over them."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    if os.path.exists(trace_path):
        os.remove(trace_path)  # --check reads it back: never an earlier run's
    mark = LastGradientMark(model)
    times = {c: [] for c in COLUMNS}
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for s in range(steps):
                barrier()
                x, y = batches[s % len(batches)]
                mark.reset()
                c0 = cpu_now()
                t0 = time.perf_counter()
                with record_function("ddp_step.zero_grad"):
                    opt.zero_grad()
                t1 = time.perf_counter()
                with record_function("ddp_step.forward"):
                    loss = torch.nn.functional.mse_loss(model(x), y)
                t2 = time.perf_counter()
                with record_function("ddp_step.backward"):
                    loss.backward()
                    t3 = time.perf_counter()
                    mark.close_region()
                with record_function("ddp_step.optimizer"):
                    opt.step()
                t4 = time.perf_counter()
                c1 = cpu_now()
                ready = mark.at if mark.at is not None else t3
                lag = latest(ready) - ready  # the ranks share CLOCK_MONOTONIC (one host)
                wait = t3 - ready
                for c, v in zip(COLUMNS, (t4 - t0, t1 - t0, t2 - t1, t3 - t2 - wait, wait,
                                          min(lag, wait), 0.0, t4 - t3, c1 - c0)):
                    times[c].append(v)
        prof.export_chrome_trace(trace_path)
    finally:
        mark.remove()
    times["copies"] = copies_in_waits(trace_path) or [0.0]
    return [statistics.median(times[c]) for c in COLUMNS]


def trace_events(path):
    import json

    with open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def copies_in_waits(path):
    """Seconds of DDP_COPIES events inside each ddp_step.comm_wait region of a trace."""
    events = trace_events(path)
    out = []
    for w in (e for e in events if e["name"] == "ddp_step.comm_wait"):
        end = w["ts"] + w["dur"]
        out.append(sum(e["dur"] for e in events if e["name"] in DDP_COPIES and
                       e["tid"] == w["tid"] and w["ts"] <= e["ts"] < end) / 1e6)
    return out


def print_table(rows, ranks):
    print(f"\nDDP step timeline (--profile; median of the profiled steps, mean over {ranks} "
          "ranks; ms)")
    print("| model | backend | step | zero_grad | forward | backward compute | "
          "comm wait after backward | of which peer lag | of which DDP copies | optimizer | "
          "backend CPU |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, backend, values in rows:
        *secs, cpu = values
        cells = " | ".join(f"{v * 1e3:.2f}" for v in secs)
        print(f"| {name} | {backend} | {cells} | {cpu / 1e6:.2f} |")


def check_trace(path):
    """--check: the trace holds every region of every profiled step, and DDP's all-reduces."""
    names = [e["name"] for e in trace_events(path)]
    wanted = [f"ddp_step.{r}" for r in ("zero_grad", "forward", "backward", "comm_wait",
                                        "optimizer")] + ["c10d::allreduce_"]
    missing = [w for w in wanted if w not in names]
    counts = {w: names.count(w) for w in wanted[:5]}
    if missing or len(set(counts.values())) != 1:
        return f"{path}: regions missing {missing} or unequal in number {counts}"
    return ""
