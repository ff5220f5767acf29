#!/usr/bin/python3
"""Where the time of one small all_reduce goes, layer by layer: chorus and gloo, same run.

    PYTHONPATH=build/python/torch2 .venv-torch2/bin/python python/bench/allreduce_overhead.py
        [--np 2 4] [--bytes 8] [--iters 3000] [--rounds 5]

Starts the ranks itself (one process per rank on this host, env:// rendezvous). Each rank
times, on the same tensor, one blocking all_reduce entered at successively lower layers:

  dist.all_reduce     the public call (Python wrapper: group lookup, checks, options)
  pg.allreduce        torch's ProcessGroup object from Python (C++ ProcessGroup, the
                      c10d::allreduce_ dispatcher op, the backend's allreduce), then wait()
  backend.allreduce   the backend object itself from Python (no dispatcher), then wait()
  ... async           the same with asyncOp=True: the path a Work takes when the caller may
                      not wait for it at once (chorus: host stream + completion queue)
  size-1 group        dist.all_reduce on a group of one rank: every layer, no peer

Rounds interleave the backends and layers; the table shows the median of the rounds' means
(microseconds per call, rank 0).
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time


def rank_main(rank, n, nbytes, iters, rounds):
    import torch
    import torch.distributed as dist
    import chorus_torch  # noqa: F401

    dist.init_process_group("gloo", rank=rank, world_size=n)
    groups = {"gloo": dist.group.WORLD, "chorus": dist.new_group(backend="chorus")}
    singles = {}
    for name in groups:
        for r in range(n):
            g = dist.new_group([r], backend=name)
            if r == rank:
                singles[name] = g
    t = torch.ones(max(1, nbytes // 4))
    sync = dist.AllreduceOptions()
    sync.asyncOp = False
    asyn = dist.AllreduceOptions()
    asyn.asyncOp = True

    def layers(name):
        g = groups[name]
        b = g._get_backend(torch.device("cpu"))
        one = singles[name]
        return {
            "dist.all_reduce": lambda: dist.all_reduce(t, group=g),
            "pg.allreduce": lambda: g.allreduce([t], sync).wait(),
            "backend.allreduce": lambda: b.allreduce([t], sync).wait(),
            "dist.all_reduce async_op=True, wait": lambda: dist.all_reduce(
                t, group=g, async_op=True).wait(),
            "backend.allreduce async, wait": lambda: b.allreduce([t], asyn).wait(),
            "size-1 group dist.all_reduce": lambda: dist.all_reduce(t, group=one),
        }

    table = {name: layers(name) for name in groups}
    samples = {(name, layer): [] for name in table for layer in table[name]}
    for _ in range(rounds):
        for name in table:
            for layer, fn in table[name].items():
                n_iter = iters if name == "chorus" else max(50, iters // 10)
                for _ in range(max(10, n_iter // 20)):  # warm-up
                    fn()
                dist.barrier(group=groups["gloo"])
                t0 = time.perf_counter()
                for _ in range(n_iter):
                    fn()
                samples[(name, layer)].append((time.perf_counter() - t0) / n_iter)
    if rank == 0:
        print(f"\nall_reduce of {nbytes} B float32, {n} processes (one host), µs per call,"
              f" median of {rounds} rounds")
        print("| layer | gloo µs | chorus µs |")
        print("|---|---:|---:|")
        for layer in table["chorus"]:
            g = statistics.median(samples[("gloo", layer)]) * 1e6
            c = statistics.median(samples[("chorus", layer)]) * 1e6
            print(f"| {layer} | {g:.1f} | {c:.1f} |")
        sys.stdout.flush()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--bytes", type=int, default=8)
    ap.add_argument("--iters", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank is not None:
        return rank_main(a.rank, a.np[0], a.bytes, a.iters, a.rounds)
    with open("/proc/loadavg") as f:
        print("load average at start:", f.read().split()[0])
    for n in a.np:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--np", str(n),
                                   "--bytes", str(a.bytes), "--iters", str(a.iters),
                                   "--rounds", str(a.rounds)], env=env)
                 for r in range(n)]
        if any(p.wait() != 0 for p in procs):
            sys.exit("a rank failed")
    with open("/proc/loadavg") as f:
        print("load average at end:", f.read().split()[0])


if __name__ == "__main__":
    main()
