"""Each collective once, on 4 ranks, checked against what it must produce.
    PYTHONPATH=build/python /usr/bin/python3 python/examples/collectives.py"""
import torch
import torch.distributed as dist

from launch import launch


def collectives(rank, n):
    t = torch.tensor([float(rank)])
    dist.broadcast(t, src=1)
    assert t.item() == 1
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    assert t.item() == n * (n + 1) / 2
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)                 # gloo cannot do this one
    assert t.item() == (n - 1) / 2
    t = torch.tensor([float(rank)])
    dist.reduce(t, dst=0, op=dist.ReduceOp.MAX)
    assert rank != 0 or t.item() == n - 1
    out = [torch.empty(1) for _ in range(n)]
    dist.all_gather(out, torch.tensor([float(rank)]))
    assert [o.item() for o in out] == list(range(n))
    out = [torch.empty(1) for _ in range(n)] if rank == 0 else None
    dist.gather(torch.tensor([float(rank * rank)]), out, dst=0)
    assert rank != 0 or [o.item() for o in out] == [r * r for r in range(n)]
    mine = torch.empty(1)
    dist.scatter(mine, [torch.tensor([10.0 * r]) for r in range(n)] if rank == 0 else None, src=0)
    assert mine.item() == 10 * rank
    got = torch.empty(1)
    dist.reduce_scatter(got, [torch.tensor([float(rank + j)]) for j in range(n)])
    assert got.item() == sum(r + rank for r in range(n))     # gloo 1.13 lacks this one
    out = torch.empty(n)
    dist.all_to_all_single(out, torch.arange(n, dtype=torch.float32) + 100 * rank)
    assert out.tolist() == [100 * r + rank for r in range(n)]
    dist.barrier()
    if rank == 0:
        print(f"broadcast, all_reduce (sum, avg), reduce, all_gather, gather, scatter, "
              f"reduce_scatter, all_to_all_single, barrier: all correct on {n} ranks")


if __name__ == "__main__":
    launch(collectives, 4)
