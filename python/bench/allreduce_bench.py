#!/usr/bin/python3
"""all_reduce latency and bandwidth through torch.distributed: chorus vs gloo, same run.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/allreduce_bench.py [--np 2 4]
        [--min-bytes 8] [--max-bytes 64M] [--rounds 5]
    PYTHONPATH=build/python/torch2 .venv-torch2/bin/python python/bench/allreduce_bench.py ...

Starts the ranks itself (one process per rank on this host, env:// rendezvous). Every
process joins both backends; for each size the two backends run back to back, so they see
the same machine load, in --rounds interleaved rounds (gloo first in even rounds, chorus
first in odd ones). float32 SUM; time per call on rank 0 after a barrier, averaged over
a round's iterations (a size-dependent number, split over the rounds); the table shows each backend's median round, and the
speedup is the median of the rounds' own ratios; bus bandwidth = 2(n-1)/n * bytes / time.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time


def parse_bytes(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def human(b):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= size:
            return f"{b // size} {unit}"
    return f"{b} B"


def rank_main(rank, n, min_bytes, max_bytes, rounds):
    import torch
    import torch.distributed as dist
    import chorus_torch  # noqa: F401

    dist.init_process_group("gloo", rank=rank, world_size=n)
    groups = {"gloo": dist.group.WORLD, "chorus": dist.new_group(backend="chorus")}
    rows = []
    size = min_bytes
    while size <= max_bytes:
        t = torch.ones(max(1, size // 4))
        total = max(5, min(1000, (64 << 20) // max(size, 1) // 4))
        iters = max(3, total // rounds)  # per round
        times = {name: [] for name in groups}
        for name, g in groups.items():
            for _ in range(max(2, total // 10)):  # warm-up
                dist.all_reduce(t, group=g)
        for r in range(rounds):
            for name in (("gloo", "chorus") if r % 2 == 0 else ("chorus", "gloo")):
                g = groups[name]
                dist.barrier(group=groups["gloo"])
                t0 = time.perf_counter()
                for _ in range(iters):
                    dist.all_reduce(t, group=g)
                times[name].append((time.perf_counter() - t0) / iters)
        ratio = statistics.median(g / c for g, c in zip(times["gloo"], times["chorus"]))
        rows.append((size, statistics.median(times["gloo"]), statistics.median(times["chorus"]),
                     ratio))
        size *= 4 if size < 1024 else 2
    if rank == 0:
        print(f"\nall_reduce float32 sum, {n} processes (one host), median of {rounds} rounds")
        print(f"| size | gloo µs | chorus µs | gloo busbw GB/s | chorus busbw GB/s | chorus speedup |")
        print("|---:|---:|---:|---:|---:|---:|")
        for size, tg, tc, ratio in rows:
            bw = lambda tt: 2 * (n - 1) / n * size / tt / 1e9
            print(f"| {human(size)} | {tg * 1e6:.1f} | {tc * 1e6:.1f} | {bw(tg):.2f} | {bw(tc):.2f} | {ratio:.2f}x |")
        sys.stdout.flush()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--min-bytes", default="8")
    ap.add_argument("--max-bytes", default="64M")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    lo, hi = parse_bytes(a.min_bytes), parse_bytes(a.max_bytes)
    if a.rank is not None:
        return rank_main(a.rank, a.np[0], lo, hi, a.rounds)
    with open("/proc/loadavg") as f:
        print("load average at start:", f.read().split()[0])
    for n in a.np:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--np", str(n),
                                   "--min-bytes", str(lo), "--max-bytes", str(hi),
                                   "--rounds", str(a.rounds)], env=env)
                 for r in range(n)]
        if any(p.wait() != 0 for p in procs):
            sys.exit("a rank failed")
    with open("/proc/loadavg") as f:
        print("load average at end:", f.read().split()[0])


if __name__ == "__main__":
    main()
