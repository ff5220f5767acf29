"""DDP training with gradient accumulation: 4 micro-batches per step, the first 3 under
no_sync() (no communication), the 4th all-reduces the accumulated gradients.
    PYTHONPATH=build/python /usr/bin/python3 python/examples/ddp_no_sync.py"""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from launch import launch

ACCUMULATE = 4


def train(rank, n):
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    g = torch.Generator().manual_seed(rank)
    w_true = torch.arange(10, dtype=torch.float32) / 10
    for step in range(60):
        opt.zero_grad()
        for micro in range(ACCUMULATE):
            x = torch.randn(16, 10, generator=g)
            y = (x @ w_true).unsqueeze(1)
            loss = nn.functional.mse_loss(model(x), y) / ACCUMULATE
            if micro < ACCUMULATE - 1:
                with model.no_sync():
                    loss.backward()
            else:
                loss.backward()
        opt.step()
        if rank == 0 and step % 20 == 0:
            print(f"step {step:3d} loss {loss.item() * ACCUMULATE:.4f}")
    # Replicas must be identical after training.
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    assert torch.equal(flat, ref), "replicas diverged"
    if rank == 0:
        print(f"final loss {loss.item() * ACCUMULATE:.4f}; replicas identical on {n} ranks")


if __name__ == "__main__":
    launch(train, 2)
