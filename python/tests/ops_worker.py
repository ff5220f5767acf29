"""One rank of the chorus-vs-gloo check (started by test_backend.py).

Every process joins a gloo group and a chorus group built from the same init method, runs
each operation on both with the same inputs and asserts the results are equal. Where gloo
in PyTorch 1.13 has no such operation (reduce_scatter, AVG, PREMUL_SUM, bfloat16 ...) the
reference is computed here from every rank's inputs, which each process can rebuild.
Inputs are small integers, so every reduction is exact whatever the summation order.
"""
import datetime
import faulthandler
import sys

import torch
import torch.distributed as dist

import chorus_torch  # noqa: F401  (registers backend "chorus")

R = dist.ReduceOp
TORCH1 = torch.__version__.startswith("1.")


def data(rank, shape, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * salt + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    lo = 0 if dtype == torch.uint8 else -3
    x = torch.randint(lo, 4, shape, generator=g)
    if dtype.is_complex:
        return torch.complex(x.double(), -x.double()).to(dtype)
    return x.to(dtype)


def same(a, b, what):
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
    assert torch.equal(a, b), f"{what}: chorus {a.flatten()[:8]} != reference {b.flatten()[:8]}"


def both(fn, *args):
    """fn(group, *args) on gloo, then on chorus; returns the two results."""
    return fn(GLOO, *args), fn(CHORUS, *args)


def check_broadcast(rank, n):
    def run(g, t):
        t = t.clone()
        dist.broadcast(t, src=n - 1, group=g)
        return t
    a, b = both(run, data(rank, (5, 3), torch.float32))
    same(b, a, "broadcast")
    # Non-contiguous (every other column). gloo 1.13 writes such a tensor as if it were
    # contiguous, so the reference is built here.
    tc = data(rank, (6, 4), torch.int64)
    dist.broadcast(tc[:, ::2], src=0, group=CHORUS)
    ref = data(rank, (6, 4), torch.int64)
    ref[:, ::2] = data(0, (6, 4), torch.int64)[:, ::2]
    same(tc, ref, "broadcast non-contiguous")


GLOO_DTYPES = [torch.float32, torch.float64, torch.float16, torch.int8, torch.uint8, torch.int32,
               torch.int64]


def reduce_ref(n, shape, dtype, op, salt):
    xs = [data(r, shape, dtype, salt) for r in range(n)]
    acc = xs[0].clone()
    for x in xs[1:]:
        acc = {R.SUM: torch.add, R.PRODUCT: torch.mul, R.MIN: torch.minimum, R.MAX: torch.maximum}[op](acc, x)
    return acc


def check_allreduce(rank, n):
    def run(g, t, op):
        t = t.clone()
        dist.all_reduce(t, op=op, group=g)
        return t
    for dtype in GLOO_DTYPES:
        for op in (R.SUM, R.PRODUCT, R.MIN, R.MAX):
            x = data(rank, (33,), dtype, salt=7)
            a, b = both(run, x, op)
            same(b, a, f"all_reduce {dtype} {op}")
    for dtype, ops in ((torch.bfloat16, (R.SUM, R.PRODUCT, R.MIN, R.MAX)), (torch.bool, (R.MIN, R.MAX)),
                       (torch.complex64, (R.SUM,))):
        for op in ops:
            t = data(rank, (17,), dtype, salt=3)
            dist.all_reduce(t, op=op, group=CHORUS)
            same(t, reduce_ref(n, (17,), dtype, op, 3), f"all_reduce {dtype} {op}")
    # AVG: gloo has none; gloo's SUM divided by n is the reference (exact: n is 2 or 4).
    x = data(rank, (40,), torch.float32, salt=5)
    ref = run(GLOO, x, R.SUM) / n
    same(run(CHORUS, x, R.AVG), ref, "all_reduce AVG")
    # PREMUL_SUM: gloo's SUM of the pre-multiplied inputs.
    # (A factor tensor is passed in a list in 1.13, alone in 2.x.)
    tensor_factor = [torch.tensor([0.5])] if TORCH1 else torch.tensor([0.5])
    for factor in (2.0, tensor_factor):
        f = factor if isinstance(factor, float) else torch.as_tensor(factor[0] if TORCH1 else factor).item()
        op = dist._make_nccl_premul_sum(factor)
        same(run(CHORUS, x, op), run(GLOO, x * f, R.SUM), f"all_reduce PREMUL_SUM {factor}")
    # Non-contiguous (a transposed view) and async with a future.
    m = data(rank, (4, 6), torch.float64, salt=9).t()
    same(run(CHORUS, m, R.SUM), reduce_ref(n, (4, 6), torch.float64, R.SUM, 9).t(), "all_reduce transposed")
    t = x.clone()
    work = dist.all_reduce(t, group=CHORUS, async_op=True)
    got = work.get_future().then(lambda fut: fut.value()[0] * 2).wait()
    same(got, run(GLOO, x, R.SUM) * 2, "all_reduce future")
    assert work.is_completed() and work.is_success()


def check_coalesced_and_reduce(rank, n):
    def run(g, ts):
        ts = [t.clone() for t in ts]
        dist.all_reduce_coalesced(ts, group=g)
        return ts
    ins = [data(rank, (5,), torch.float32, 1), data(rank, (2, 3), torch.float32, 2)]
    for a, b in zip(*both(run, ins)):
        same(b, a, "all_reduce_coalesced")

    def red(g, t, op):
        t = t.clone()
        dist.reduce(t, dst=n - 1, op=op, group=g)
        return t
    for op in (R.SUM, R.MAX):
        a, b = both(red, data(rank, (9,), torch.int32, 4), op)
        if rank == n - 1:
            same(b, a, f"reduce {op}")


def check_gathers(rank, n):
    x = data(rank, (3, 2), torch.float32, 11)

    def ag(g):
        out = [torch.empty_like(x) for _ in range(n)]
        dist.all_gather(out, x, group=g)
        return torch.stack(out)
    a, b = both(ag)
    same(b, a, "all_gather")

    out = torch.empty((n * 3, 2))
    dist.all_gather_into_tensor(out, x, group=CHORUS)  # gloo 1.13 lacks it: its all_gather
    same(out, ag(GLOO).reshape(n * 3, 2), "all_gather_into_tensor (_allgather_base)")

    ins = [x, data(rank, (4,), torch.float32, 12)]

    def agc(g):
        out = [[torch.empty_like(t) for t in ins] for _ in range(n)]
        dist.all_gather_coalesced(out, ins, group=g)
        return out
    a, b = both(agc)
    for la, lb in zip(a, b):
        for ta, tb in zip(la, lb):
            same(tb, ta, "all_gather_coalesced")

    def gat(g):
        out = [torch.empty_like(x) for _ in range(n)] if rank == 0 else None
        dist.gather(x, out, dst=0, group=g)
        return torch.stack(out) if rank == 0 else x
    a, b = both(gat)
    same(b, a, "gather")

    def sca(g):
        out = torch.empty(3, 2)
        src = [data(r, (3, 2), torch.float32, 13) * 10 + rank for r in range(n)] if rank == n - 1 else None
        dist.scatter(out, src, src=n - 1, group=g)
        return out
    a, b = both(sca)
    same(b, a, "scatter")


def check_reduce_scatter(rank, n):
    # gloo in 1.13 has no reduce_scatter: the reference is built from every rank's inputs.
    ins = [data(rank, (5,), torch.float32, 20 + j) for j in range(n)]
    ref = sum(data(r, (5,), torch.float32, 20 + rank) for r in range(n))
    out = torch.empty(5)
    dist.reduce_scatter(out, ins, group=CHORUS)
    same(out, ref, "reduce_scatter")
    big = torch.cat([data(rank, (4,), torch.int64, 30 + j) for j in range(n)])
    out = torch.empty(4, dtype=torch.int64)
    dist.reduce_scatter_tensor(out, big, op=R.MAX, group=CHORUS)
    ref = reduce_ref(n, (4,), torch.int64, R.MAX, 30 + rank)
    same(out, ref, "reduce_scatter_tensor (_reduce_scatter_base) MAX")


def check_alltoall(rank, n):
    x = data(rank, (2 * n, 3), torch.float32, 40)

    def single(g, out_splits, in_splits):
        rows = sum(out_splits) if out_splits else 2 * n
        out = torch.empty(rows, 3)
        dist.all_to_all_single(out, x, out_splits, in_splits, group=g)
        return out
    a, b = both(single, None, None)
    same(b, a, "all_to_all_single")
    # Uneven: rank r sends (r + j) % 3 rows to rank j, receives (j + r) % 3 from rank j.
    in_splits = [(rank + j) % 3 for j in range(n)]
    out_splits = [(j + rank) % 3 for j in range(n)]
    xs = data(rank, (sum(in_splits), 3), torch.float32, 41)

    def uneven(g):
        out = torch.empty(sum(out_splits), 3)
        dist.all_to_all_single(out, xs, out_splits, in_splits, group=g)
        return out
    a, b = both(uneven)
    same(b, a, "all_to_all_single with split sizes")

    def lst(g):
        ins = [data(rank, (j + 1,), torch.int32, 42) for j in range(n)]
        outs = [torch.empty(rank + 1, dtype=torch.int32) for _ in range(n)]
        dist.all_to_all(outs, ins, group=g)
        return torch.cat(outs)
    # gloo 1.13 has no list all_to_all: rank j sent us data(j, (rank + 1,)).
    ref = torch.cat([data(j, (rank + 1,), torch.int32, 42) for j in range(n)])
    same(lst(CHORUS), ref, "all_to_all (lists)")


def check_p2p(rank, n):
    def ring(g, blocking, size=7):
        t = data(rank, (size,), torch.float64, 50)
        out = torch.empty(size, dtype=torch.float64)
        nxt, prv = (rank + 1) % n, (rank - 1) % n
        if blocking:
            if rank % 2 == 0:
                dist.send(t, nxt, group=g); dist.recv(out, prv, group=g)
            else:
                dist.recv(out, prv, group=g); dist.send(t, nxt, group=g)
        else:
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, nxt, g),
                                           dist.P2POp(dist.irecv, out, prv, g)])
            for r in reqs:
                r.wait()
        return out
    for blocking in (True, False):
        a, b = both(ring, blocking)
        same(b, a, f"send/recv ring (blocking={blocking})")
    # Every rank sends 8 MiB before it receives: only a batch (one Chorus group) completes.
    a, b = both(ring, False, 1 << 20)
    same(b, a, "batch_isend_irecv ring of 8 MiB")
    # isend/irecv pairs, and the source rank of a receive.
    if rank == 0:
        w = dist.isend(torch.arange(5.), 1, group=CHORUS)
        w.wait()
    elif rank == 1:
        t = torch.empty(5)
        w = dist.irecv(t, 0, group=CHORUS)
        w.wait()
        same(t, torch.arange(5.), "isend/irecv")
        assert w._source_rank() == 0
    # recv without a source (recvAnysource): rank 0 takes one message from every other
    # rank in arrival order; each must name its sender and carry that sender's data.
    if rank == 0:
        senders = []
        for _ in range(n - 1):
            t = torch.empty(6, dtype=torch.float64)
            src = dist.recv(t, group=CHORUS)
            same(t, torch.full((6,), float(src), dtype=torch.float64), f"recv from any (got {src})")
            senders.append(src)
        assert sorted(senders) == list(range(1, n)), f"any-source senders {senders}"
    else:
        dist.send(torch.full((6,), float(rank), dtype=torch.float64), 0, group=CHORUS)


def check_coalescing_manager(rank, n):
    """2.x: _coalescing_manager on cpu tensors, whose fast paths are the backend's
    allgather_into_tensor_coalesced, reduce_scatter_tensor_coalesced and allreduce_coalesced.
    The reference is built here from every rank's inputs (exact: small integers)."""
    if TORCH1:
        return
    from torch.distributed.distributed_c10d import _coalescing_manager
    cpu = torch.device("cpu")
    ins = [data(rank, (n * k,), torch.float64, 60 + k) for k in (1, 3)]
    every = [[data(r, (n * k,), torch.float64, 60 + k) for k in (1, 3)] for r in range(n)]
    ag = [torch.empty(n * i.numel(), dtype=torch.float64) for i in ins]
    with _coalescing_manager(group=CHORUS, device=cpu, async_ops=True) as cm:
        for i, o in zip(ins, ag):
            dist.all_gather_into_tensor(o, i, group=CHORUS)
    cm.wait()
    for k, o in enumerate(ag):
        same(o, torch.cat([e[k] for e in every]), f"coalesced all_gather_into_tensor #{k}")
    rs = [torch.empty(i.numel() // n, dtype=torch.float64) for i in ins]
    with _coalescing_manager(group=CHORUS, device=cpu, async_ops=True) as cm:
        for i, o in zip(ins, rs):
            dist.reduce_scatter_tensor(o, i, group=CHORUS)
    cm.wait()
    for k, o in enumerate(rs):
        total = sum(e[k] for e in every)
        same(o, total.chunk(n)[rank], f"coalesced reduce_scatter_tensor #{k}")
    ar = [i.clone() for i in ins]
    with _coalescing_manager(group=CHORUS, device=cpu):
        for t in ar:
            dist.all_reduce(t, group=CHORUS)
    for k, t in enumerate(ar):
        same(t, sum(e[k] for e in every), f"coalesced all_reduce #{k}")


def check_barrier_and_errors(rank, n):
    dist.barrier(group=CHORUS)
    w = dist.barrier(group=CHORUS, async_op=True)
    w.wait()
    CHORUS.monitored_barrier(datetime.timedelta(seconds=20))

    def raises(fn, text):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            assert text in str(e), f"expected '{text}' in: {e}"
            return
        raise AssertionError(f"no error (expected '{text}')")
    raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16), group=CHORUS), "int16")
    raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), op=R.BAND, group=CHORUS), "BAND")
    raises(lambda: dist.all_reduce(torch.ones(3).to_sparse(), group=CHORUS), "dense")
    # The communicator still works after refused calls.
    t = torch.ones(3)
    dist.all_reduce(t, group=CHORUS)
    same(t, torch.full((3,), float(n)), "all_reduce after errors")


def check_caller_waits(rank, n):
    """2.x passes async_op down (asyncOp): a blocking call with nothing queued runs on the
    calling thread and returns its Work completed; one issued behind queued Works takes the
    stream after them, so operations still run, and complete, in the order issued."""
    if TORCH1:
        return
    sync = dist.AllreduceOptions()
    sync.asyncOp = False
    x = data(rank, (5,), torch.float64, salt=21)
    ref = reduce_ref(n, (5,), torch.float64, R.SUM, 21)
    t = x.clone()
    w = CHORUS.allreduce([t], sync)
    assert w.is_completed() and w.is_success(), "blocking all_reduce returned before completing"
    same(t, ref, "blocking all_reduce")
    same(w.get_future().value()[0], ref, "future of a completed blocking all_reduce")
    same(w.get_future().then(lambda f: f.value()[0] + 1).wait(), ref + 1, "its then()")
    assert w.wait()
    # Queued asynchronous Works, then blocking calls on the same tensors.
    ts = [x.clone() * (k + 1) for k in range(6)]
    works = [dist.all_reduce(t, group=CHORUS, async_op=True) for t in ts]
    dist.all_reduce(ts[-1], group=CHORUS)  # after the async one on the same tensor: n * sum
    assert all(w.is_completed() for w in works), "a blocking call overtook queued Works"
    for k, t in enumerate(ts[:-1]):
        same(t, ref * (k + 1), f"queued all_reduce #{k}")
    same(ts[-1], ref * len(ts) * n, "blocking all_reduce behind an async one on its tensor")
    # Non-contiguous output on the inline path: copied back before the call returns.
    m = data(rank, (3, 4), torch.float64, salt=22).t()
    dist.all_reduce(m, group=CHORUS)
    same(m, reduce_ref(n, (3, 4), torch.float64, R.SUM, 22).t(), "blocking all_reduce transposed")
    b = data(rank, (7,), torch.int32, salt=23)
    dist.broadcast(b, src=n - 1, group=CHORUS)
    same(b, data(n - 1, (7,), torch.int32, salt=23), "blocking broadcast")
    dist.barrier(group=CHORUS)


def chorus_part(error):
    """The text from "chorus" on (torch may put its own words before a backend's error)."""
    text = str(error)
    return text[text.index("chorus"):].strip()


def check_timeouts(rank, n):
    """Last: rank 1 never sends. Rank 0's wait(timeout) gives up, and Chorus's own deadline
    (the group's timeout, 2 s) then fails the receive; rank 0's monitored barrier names
    the ranks that never came."""
    short = dist.new_group(backend="chorus", timeout=datetime.timedelta(seconds=2))
    # 2.x: a blocking all_reduce runs on the caller's thread; the group's deadline fails it.
    inline = None if TORCH1 else dist.new_group(backend="chorus",
                                                timeout=datetime.timedelta(seconds=2))
    if inline is not None and rank == 0:
        t0 = __import__("time").time()
        try:
            dist.all_reduce(torch.ones(2), group=inline)
            raise AssertionError("an all_reduce the other ranks never joined completed")
        except RuntimeError as e:
            assert "Timed out" in str(e), e
            first = chorus_part(e)
        assert __import__("time").time() - t0 < 15
        try:  # the failure is sticky: a later operation fails with the first error, unissued
            dist.all_reduce(torch.ones(2), group=inline)
            raise AssertionError("an all_reduce on a failed group completed")
        except RuntimeError as e:
            assert chorus_part(e) == first, f"{e} is not the first failure ({first})"
    if rank == 0:
        w = dist.irecv(torch.empty(4), 1, group=short)
        t0 = __import__("time").time()
        try:
            w.wait(datetime.timedelta(milliseconds=200))
            raise AssertionError("wait(200 ms) returned for a message never sent")
        except RuntimeError as e:
            assert "did not complete within 200 ms" in str(e), e
        try:
            w.wait()
            raise AssertionError("a receive never matched completed")
        except RuntimeError as e:
            assert "chorus" in str(e), e
            first = chorus_part(e)
        assert __import__("time").time() - t0 < 15
        # Sticky on the stream path too: the next receive is never issued (it would time
        # out again with its own sequence number) and fails with the first error.
        try:
            dist.irecv(torch.empty(4), 1, group=short).wait()
            raise AssertionError("a receive on a failed group completed")
        except RuntimeError as e:
            assert chorus_part(e) == first, f"{e} is not the first failure ({first})"
        try:
            CHORUS.monitored_barrier(datetime.timedelta(milliseconds=300), wait_all_ranks=True)
            raise AssertionError("monitored_barrier passed without the other ranks")
        except RuntimeError as e:
            missing = ", ".join(str(r) for r in range(1, n))
            assert f"{missing} failed to pass monitored_barrier" in str(e), e


def main():
    global GLOO, CHORUS
    # If this rank is still here well before the runner gives up (180 s), print where every
    # thread is, so a hang in CI says where it stopped.
    faulthandler.dump_traceback_later(150, exit=False)
    rank, n, init = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n)
    GLOO = dist.group.WORLD
    CHORUS = dist.new_group(backend="chorus")
    assert dist.get_backend(CHORUS) == "chorus"
    for check in (check_broadcast, check_allreduce, check_coalesced_and_reduce, check_gathers,
                  check_reduce_scatter, check_alltoall, check_p2p, check_coalescing_manager,
                  check_barrier_and_errors, check_caller_waits):
        check(rank, n)
    dist.barrier(group=GLOO)
    check_timeouts(rank, n)
    dist.barrier(group=GLOO)
    print(f"rank {rank}: all checks passed", flush=True)


if __name__ == "__main__":
    main()
