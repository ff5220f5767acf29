#!/usr/bin/python3
"""Training-step time through torch.distributed: DDP and FSDP2, chorus vs gloo, same run.

    PYTHONPATH=build/python/torch2 .venv-torch2/bin/python python/bench/ddp_step_bench.py \
        [--np 2 4] [--threads 1 default] [--models mlp cnn transformer] [--modes ddp fsdp] \
        [--rounds 5] [--steps 4] [--check] [--profile DIR [--profile-steps 5]] [--floor]

What an all-reduce microbenchmark does not show: in DDP the gradient all-reduces overlap
the backward pass, so what counts is how much the communication delays the step, CPU time
taken from the compute threads included. Starts the ranks itself (one process per rank on
this host). Every process joins both backends (a gloo group and a chorus group) and builds
the same model twice from the same seed, one wrapped over each group; the two train on the
same batches. For each model the backends alternate in --rounds rounds (gloo first in even
rounds, chorus first in odd ones) of --steps steps each after warm-up steps, so both see the
same machine load; a round's time is its mean step on rank 0 (zero_grad, forward, backward
with its overlapped all-reduces, optimizer step). The table shows each backend's median
round and the median of the rounds' own gloo/chorus ratios (> 1: chorus faster).

"CPU/step" is the CPU time per step of the backend's own threads, averaged over the ranks:
the threads that appeared while that backend's group was made and first used (gloo: its
worker threads; chorus: the host stream's worker, the completion thread and any transport
progress thread), read from /proc/self/task/*/schedstat. Work a backend does on the
caller's thread is not in it (neither does any for DDP's asynchronous all-reduces).

"max diff" is the largest relative difference between the two models' parameters after the
run (the backends sum in different orders, so a few ulps; a broken reduction shows as
O(1)); --check makes a difference above 1e-4 fail the run (the test torch2_ddp_step_parity).

--profile DIR adds, after each DDP model's rounds, a few profiled steps per backend: a chrome
trace per rank and backend in DIR and a table of where a step's time went (forward, backward
compute, the wait on the communication after the last gradient, optimizer; see
ddp_step_profile.py); with --check the traces are read back for those regions.

--floor adds a third DDP model per model, interleaved with the two: DDP over the gloo group
with a communication hook that communicates nothing (each rank keeps its own gradients), so
its step is the compute, DDP's own bucket copies and the optimizer, with no backend at all.
The second table prints its median step and gloo/floor, the most any backend could gain
over gloo in that run (its ranks do not wait for each other within a round: the floor is,
if anything, low, and the ceiling high), and chorus/floor, what chorus's communication adds.
A fourth model, the "synced floor", is the same with one meeting of the ranks a step: its
hook, on DDP's last bucket, queues an asynchronous 4-byte all-reduce over the chorus group
and returns its future (the path a chorus bucket takes: stream worker, completion thread,
future) and communicates no gradient. Every DDP backend makes the
ranks meet there (the last bucket's all-reduce needs every rank's gradients), so its step is
compute + that meeting: gloo/synced and chorus/synced are the ratios without the floor's
advantage of ranks that never wait for each other.
Beside them, the context switches per step of each model's rounds (every thread of the
process: compute, OpenMP and backend threads; voluntary + involuntary, mean over the ranks):
what a backend adds in wake-ups and preemptions over the floor's.

Models: mlp 1024-2048-2048-2048-10, batch 8 (10.5 M parameters, 40 MiB of gradients against
little compute: the communication is exposed); cnn (three 3x3 convolutions, 32x32 RGB,
batch 32); transformer (4 encoder layers, d 512, 8 heads, sequence 64, batch 4, no dropout).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def thread_ids():
    return set(int(t) for t in os.listdir("/proc/self/task"))


def cpu_ns(tids):
    """Nanoseconds on CPU, summed over the threads `tids` (gone ones count 0)."""
    total = 0
    for t in tids:
        try:
            with open(f"/proc/self/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def switches():
    """Context switches (voluntary, involuntary) so far, summed over this process's threads."""
    vol = invol = 0
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        vol += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        invol += int(line.split()[1])
        except OSError:
            pass
    return vol, invol


def make_model(name, seed):
    import torch
    from torch import nn

    torch.manual_seed(seed)
    if name == "mlp":
        return nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                             nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
    if name == "transformer":
        layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True)
        return nn.Sequential(nn.TransformerEncoder(layer, 4, enable_nested_tensor=False),
                             nn.Flatten(), nn.Linear(64 * 512, 10))
    raise ValueError(name)


def make_batches(name, rank, count):
    import torch

    g = torch.Generator().manual_seed(1000 + rank)
    shape = {"mlp": (8, 1024), "cnn": (32, 3, 32, 32), "transformer": (4, 64, 512)}[name]
    return [(torch.randn(shape, generator=g), torch.randn(shape[0], 10, generator=g))
            for _ in range(count)]


def wrap(model, mode, group):
    from torch import nn

    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, process_group=group)
    from torch.distributed.device_mesh import DeviceMesh

    try:  # PyTorch >= 2.6
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    mesh = DeviceMesh.from_group(group, "cpu", mesh_dim_names=("dp",))
    # One FSDP unit per layer (a transformer's per encoder layer), then the whole model.
    layers = [m for m in model.modules() if isinstance(m, nn.TransformerEncoderLayer)]
    if not layers:
        layers = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    for m in layers:
        fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    # float32 gradients would be reduce-scattered with ReduceOp.AVG, which PyTorch 2.8's gloo
    # sums instead (docs/TORCH.md): SUM and a division after, on both backends alike.
    for m in model.modules():
        if hasattr(m, "set_force_sum_reduction_for_comms"):
            m.set_force_sum_reduction_for_comms(True)
    return model


def no_communication(state, bucket):
    """DDP communication hook of --floor: the bucket as it is, no all-reduce."""
    import torch

    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def synced_no_communication(group):
    """DDP communication hook of --floor's "synced floor": no all-reduce of the gradients, but
    the ranks meet once a step, as any backend's last bucket makes them: on the last bucket an
    asynchronous 4-byte all-reduce over `group` whose future DDP waits for, the same path
    (chorus: the host stream's worker, the completion thread, the future) as a bucket's."""
    import torch
    import torch.distributed as dist

    one = torch.zeros(1)

    def hook(state, bucket):
        buffer = bucket.buffer()
        if bucket.is_last():
            work = dist.all_reduce(one, group=group, async_op=True)
            return work.get_future().then(lambda _: buffer)
        return no_communication(state, bucket)

    return hook


def full_params(model, mode):
    if mode == "ddp":
        return [p.detach() for p in model.parameters()]
    return [p.full_tensor().detach() for p in model.parameters()]


def rank_main(rank, n, a):
    import torch
    import torch.distributed as dist

    if a.threads != "default":
        torch.set_num_threads(int(a.threads))
    # Start torch's intra-op pool before the backends, so its threads are not counted as theirs.
    torch.mm(torch.ones(256, 256), torch.ones(256, 256))
    import chorus_torch  # noqa: F401

    store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), n, False)
    before = thread_ids()
    dist.init_process_group("gloo", rank=rank, world_size=n, store=store)
    dist.all_reduce(torch.ones(1 << 16))
    gloo_tids = thread_ids() - before
    before = thread_ids()
    chorus = dist.new_group(backend="chorus")
    dist.all_reduce(torch.ones(1 << 16), group=chorus)
    w = dist.all_reduce(torch.ones(1 << 16), group=chorus, async_op=True)
    w.get_future().wait()
    chorus_tids = thread_ids() - before
    groups = {"gloo": dist.group.WORLD, "chorus": chorus}
    tids = {"gloo": gloo_tids, "chorus": chorus_tids}

    rows, floors, profiled, bad_traces = [], [], [], []
    for mode in a.modes:
        for name in a.models:
            models, opts = {}, {}
            backends = list(groups) + (["floor", "synced"] if a.floor and mode == "ddp" else [])
            for b in backends:
                models[b] = wrap(make_model(name, 1), mode, groups.get(b, groups["gloo"]))
                if b == "floor":
                    models[b].register_comm_hook(None, no_communication)
                if b == "synced":
                    models[b].register_comm_hook(None, synced_no_communication(groups["chorus"]))
                opts[b] = torch.optim.SGD(models[b].parameters(), lr=0.01, momentum=0.9)
            batches = make_batches(name, rank, 8)
            step_no = {b: 0 for b in backends}

            def step(b):
                x, y = batches[step_no[b] % len(batches)]
                step_no[b] += 1
                opts[b].zero_grad()
                torch.nn.functional.mse_loss(models[b](x), y).backward()
                opts[b].step()

            for b in backends:
                for _ in range(a.warmup):
                    step(b)
            times = {b: [] for b in backends}
            cpu = {b: 0 for b in backends}
            ctx = {b: [0, 0] for b in backends}
            for r in range(a.rounds):
                for b in (backends if r % 2 == 0 else backends[::-1]):
                    dist.barrier(group=groups["gloo"])
                    c0 = cpu_ns(tids.get(b, set()))
                    s0 = switches()
                    t0 = time.perf_counter()
                    for _ in range(a.steps):
                        step(b)
                    times[b].append((time.perf_counter() - t0) / a.steps)
                    cpu[b] += cpu_ns(tids.get(b, set())) - c0
                    s1 = switches()
                    ctx[b][0] += s1[0] - s0[0]
                    ctx[b][1] += s1[1] - s0[1]
            if "floor" in times:
                tf, ts = times["floor"], times["synced"]
                # Context switches per step of the whole process (every thread), per backend.
                sw = torch.tensor([c / (a.rounds * a.steps) for b in backends for c in ctx[b]],
                                  dtype=torch.float64)
                dist.all_reduce(sw, group=groups["gloo"])

                def paired(b, ref):  # the median over rounds of b's step over ref's
                    return statistics.median(x / y for x, y in zip(times[b], ref))

                floors.append((name, statistics.median(tf), paired("gloo", tf),
                               paired("chorus", tf), (sw / n).tolist(), statistics.median(ts),
                               paired("gloo", ts), paired("chorus", ts)))
            diff = 0.0
            for pg, pc in zip(full_params(models["gloo"], mode), full_params(models["chorus"], mode)):
                diff = max(diff, ((pg - pc).abs().max() / pg.abs().max().clamp_min(1e-30)).item())
            per_step = torch.tensor([cpu[b] / (a.rounds * a.steps) for b in groups], dtype=torch.float64)
            dist.all_reduce(per_step, group=groups["gloo"])
            per_step /= n
            ratio = statistics.median(g / c for g, c in zip(times["gloo"], times["chorus"]))
            rows.append((mode, name, statistics.median(times["gloo"]),
                         statistics.median(times["chorus"]), ratio, per_step[0].item(),
                         per_step[1].item(), diff))
            if a.profile and mode == "ddp":
                from ddp_step_profile import profile_backend

                def latest(t):
                    t = torch.tensor([t], dtype=torch.float64)
                    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=groups["gloo"])
                    return t.item()

                for b in groups:
                    trace = os.path.join(a.profile, f"{mode}_{name}_{b}_rank{rank}.json")
                    values = torch.tensor(profile_backend(
                        models[b], opts[b], batches, lambda: dist.barrier(group=groups["gloo"]),
                        latest, lambda b=b: cpu_ns(tids[b]), a.profile_steps, trace),
                        dtype=torch.float64)
                    if a.check:
                        from ddp_step_profile import check_trace

                        bad_traces += [m for m in [check_trace(trace)] if m]
                    dist.all_reduce(values, group=groups["gloo"])
                    profiled.append((name, b, (values / n).tolist()))
            del models, opts
    if rank == 0:
        threads = torch.get_num_threads()
        print(f"\n{n} processes, torch intra-op threads {a.threads} ({threads}), "
              f"median of {a.rounds} rounds x {a.steps} steps; backend threads: "
              f"gloo {len(gloo_tids)}, chorus {len(chorus_tids)}")
        print("| mode | model | gloo ms/step | chorus ms/step | chorus speedup | "
              "gloo CPU ms/step | chorus CPU ms/step | max diff |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for mode, name, tg, tc, ratio, cg, cc, diff in rows:
            print(f"| {mode} | {name} | {tg * 1e3:.1f} | {tc * 1e3:.1f} | {ratio:.2f}x | "
                  f"{cg / 1e6:.2f} | {cc / 1e6:.2f} | {diff:.1e} |")
        if floors:
            print("\nDDP with no communication (--floor), same rounds; medians of the rounds' "
                  "ratios:")
            print("| model | floor ms/step | gloo / floor (the most a backend could gain) | "
                  "chorus / floor | synced floor ms/step | gloo / synced | chorus / synced | "
                  "context switches/step, voluntary + involuntary, gloo / chorus / floor / "
                  "synced |")
            print("|---|---:|---:|---:|---:|---:|---:|---|")
            for name, tf, gf, cf, sw, ts, gs, cs_ in floors:
                cs = " / ".join(f"{sw[i]:.0f}+{sw[i + 1]:.0f}" for i in (0, 2, 4, 6))
                print(f"| {name} | {tf * 1e3:.1f} | {gf:.2f}x | {cf:.2f}x | {ts * 1e3:.1f} | "
                      f"{gs:.2f}x | {cs_:.2f}x | {cs} |")
        if profiled:
            from ddp_step_profile import print_table

            print_table(profiled, n)
        sys.stdout.flush()
    bad = [r for r in rows if r[7] > 1e-4]
    dist.destroy_process_group()
    if a.check and bad:
        sys.exit(f"rank {rank}: parameters differ between gloo and chorus: {bad}")
    if bad_traces:
        sys.exit(f"rank {rank}: " + "; ".join(bad_traces))


def wait_all(procs):
    """Waits for every rank; once one fails, stops the others (they would wait for it)."""
    while True:
        codes = [p.poll() for p in procs]
        if any(c not in (None, 0) for c in codes):
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            return True
        if all(c == 0 for c in codes):
            return False
        time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--threads", nargs="+", default=["1", "default"])
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn", "transformer"],
                    choices=["mlp", "cnn", "transformer"])
    ap.add_argument("--modes", nargs="+", default=["ddp", "fsdp"], choices=["ddp", "fsdp"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=4, help="steps per round and backend")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--check", action="store_true", help="fail when the parameters differ")
    ap.add_argument("--profile", metavar="DIR",
                    help="after each DDP model's rounds, profile --profile-steps steps per "
                         "backend: chrome traces per rank in DIR and a per-step breakdown "
                         "(python/bench/ddp_step_profile.py)")
    ap.add_argument("--profile-steps", type=int, default=5)
    ap.add_argument("--floor", action="store_true",
                    help="add DDP with no communication: the step a backend cannot beat")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank is not None:
        a.threads = a.threads[0]
        return rank_main(a.rank, a.np[0], a)
    with open("/proc/loadavg") as f:
        print("load average at start:", f.read().strip())
    for n in a.np:
        for threads in a.threads:
            # The launcher holds the store's server: it listens on a port the kernel picks,
            # so no other process can take the port between a probe and a rank's listen.
            import torch.distributed as dist

            server = dist.TCPStore("127.0.0.1", 0, n, True, wait_for_workers=False)
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(server.port))
            env.pop("OMP_NUM_THREADS", None)  # "default" means torch's own choice
            cmd = [sys.executable, __file__, "--np", str(n), "--threads", threads,
                   "--models", *a.models, "--modes", *a.modes, "--rounds", str(a.rounds),
                   "--steps", str(a.steps), "--warmup", str(a.warmup)] + (["--check"] if a.check else [])
            cmd += ["--floor"] if a.floor else []
            if a.profile:
                os.makedirs(a.profile, exist_ok=True)
                cmd += ["--profile", os.path.abspath(a.profile),
                        "--profile-steps", str(a.profile_steps)]
            procs = [subprocess.Popen(cmd + ["--rank", str(r)], env=env) for r in range(n)]
            failed = wait_all(procs)
            del server
            if failed:
                sys.exit("a rank failed")
    with open("/proc/loadavg") as f:
        print("load average at end:", f.read().strip())


if __name__ == "__main__":
    main()
