#!/usr/bin/python3
"""A DDP-sized bucket's all-reduce, blocking against queued, and with compute between two buckets.

    PYTHONPATH=build/python/torch2 .venv-torch2/bin/python python/bench/bucket_overlap_bench.py \
        [--np 4] [--first-mib 16] [--last-mib 24] [--compute-ms 8] [--iters 10] [--rounds 5]

Starts the ranks itself (one process per rank, env://, one torch thread each). Every process
joins a gloo group and a chorus group; the cases run in --rounds interleaved rounds (the
order reversed every other round), each case's round the median of --iters calls on rank 0:

- `blocking`: `dist.all_reduce(t)` on the last bucket's size (chorus runs it on the caller);
- `async`: `dist.all_reduce(t, async_op=True).wait()` (chorus queues it on its host stream's
  worker and the caller settles it);
- `overlap`: what DDP does with the MLP of ddp_step_bench.py: the first bucket launched with
  async_op, --compute-ms of matmuls (timed alone at the start), the last bucket launched,
  both waited for; the time of the whole;
- `serial`: the same compute first, then both buckets blocking: no overlap at all.

`overlap` against `serial` says how much of the communication the compute hid; `async`
against `blocking` what the stream path costs over the inline one (docs/PERF.md, issue 39,
"np 4: the last bucket").
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time


def rank_main(rank, args):
    import torch
    import torch.distributed as dist
    import chorus_torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.np)
    groups = {"gloo": dist.group.WORLD, "chorus": dist.new_group(backend="chorus")}
    first = torch.ones(args.first_mib << 18)
    last = torch.ones(args.last_mib << 18)
    x, w = torch.randn(8, 2048), torch.randn(2048, 512)
    t0 = time.perf_counter()
    for _ in range(50):
        torch.mm(x, w)
    per_mm = (time.perf_counter() - t0) / 50
    reps = torch.tensor([max(0, round(args.compute_ms / 1e3 / per_mm))])
    dist.all_reduce(reps, op=dist.ReduceOp.MAX)  # every rank computes the same
    reps = int(reps.item())

    def compute():
        for _ in range(reps):
            torch.mm(x, w)

    def overlap(g):
        wf = dist.all_reduce(first, group=g, async_op=True)
        compute()
        wl = dist.all_reduce(last, group=g, async_op=True)
        wf.wait()
        wl.wait()

    def serial(g):
        compute()
        dist.all_reduce(first, group=g)
        dist.all_reduce(last, group=g)

    cases = {}
    for name, g in groups.items():
        cases[f"{name} blocking"] = lambda g=g: dist.all_reduce(last, group=g)
        cases[f"{name} async"] = lambda g=g: dist.all_reduce(last, group=g, async_op=True).wait()
        cases[f"{name} overlap"] = lambda g=g: overlap(g)
        cases[f"{name} serial"] = lambda g=g: serial(g)
    for f in cases.values():
        for _ in range(2):
            f()
    times = {k: [] for k in cases}
    for r in range(args.rounds):
        for k in (list(cases) if r % 2 == 0 else list(reversed(list(cases)))):
            dist.barrier(group=groups["gloo"])
            ts = []
            for _ in range(args.iters):
                t1 = time.perf_counter()
                cases[k]()
                ts.append(time.perf_counter() - t1)
            times[k].append(statistics.median(ts))
    if rank == 0:
        print(f"np {args.np}, buckets {args.first_mib} + {args.last_mib} MiB, compute between "
              f"them {reps} matmuls = {reps * per_mm * 1e3:.1f} ms alone; ms, median of "
              f"{args.rounds} rounds (each the median of {args.iters} calls)")
        for k, v in times.items():
            rounds = " ".join(f"{t * 1e3:.2f}" for t in v)
            print(f"{k:16s} {statistics.median(v) * 1e3:8.2f}   rounds {rounds}")
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--np", type=int, default=4)
    p.add_argument("--first-mib", type=int, default=16)
    p.add_argument("--last-mib", type=int, default=24)
    p.add_argument("--compute-ms", type=float, default=8.0)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank >= 0:
        rank_main(args.rank, args)
        return 0
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    procs = [
        subprocess.Popen([sys.executable, __file__, *sys.argv[1:], "--rank", str(r)],
                         env=dict(env, RANK=str(r)))
        for r in range(args.np)
    ]
    return max(p.wait() for p in procs)


if __name__ == "__main__":
    sys.exit(main())
