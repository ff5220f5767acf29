"""Distributed evaluation: each rank scores its shard of a data set, all_gather collects
the per-rank predictions, every rank computes the same accuracy.
    PYTHONPATH=build/python /usr/bin/python3 python/examples/distributed_eval.py"""
import torch
import torch.distributed as dist

from launch import launch

SAMPLES = 1000


def evaluate(rank, n):
    g = torch.Generator().manual_seed(42)  # same data set and model on every rank
    x = torch.randn(SAMPLES, 8, generator=g)
    labels = (x.sum(dim=1) > 0).long()
    w = torch.ones(8) + 0.5 * torch.randn(8, generator=g)
    shard = slice(rank * SAMPLES // n, (rank + 1) * SAMPLES // n)
    preds = ((x[shard] @ w) > 0).long()
    # Shards may differ in length: pad to the longest, gather, then trim.
    longest = -(-SAMPLES // n)
    padded = torch.full((longest,), -1, dtype=torch.long)
    padded[: preds.numel()] = preds
    gathered = [torch.empty(longest, dtype=torch.long) for _ in range(n)]
    dist.all_gather(gathered, padded)
    all_preds = torch.cat([p[p >= 0] for p in gathered])
    accuracy = (all_preds == labels).float().mean().item()
    expected = (((x @ w) > 0).long() == labels).float().mean().item()
    assert abs(accuracy - expected) < 1e-9, (accuracy, expected)
    if rank == 0:
        print(f"accuracy over {SAMPLES} samples on {n} ranks: {accuracy:.3f}")


if __name__ == "__main__":
    launch(evaluate, 4)
