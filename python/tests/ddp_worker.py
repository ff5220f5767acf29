"""One rank of the DDP check: the same model, data and seed trained for 100 steps with
DistributedDataParallel on gloo and then on chorus; the parameters must agree to 1e-6."""
import faulthandler
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import chorus_torch  # noqa: F401

STEPS = 100


def train(group, rank):
    torch.manual_seed(0)  # same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))
    # Tiny buckets: several all-reduces in flight while backward still runs.
    ddp = DDP(model, process_group=group, bucket_cap_mb=0.002)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(STEPS):
        x = torch.randn(8, 16, generator=g)
        y = torch.randn(8, 4, generator=g)
        opt.zero_grad()
        nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def main():
    # If this rank is still here well before the runner gives up (180 s), print where every
    # thread is, so a hang in CI says where it stopped.
    faulthandler.dump_traceback_later(150, exit=False)
    rank, n, init = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n)
    chorus = dist.new_group(backend="chorus")
    on_gloo = train(dist.group.WORLD, rank)
    on_chorus = train(chorus, rank)
    diff = (on_gloo - on_chorus).abs().max().item()
    assert diff <= 1e-6, f"rank {rank}: DDP on chorus differs from gloo by {diff}"
    # Every rank must hold the same model (checked on gloo: an independent path).
    mine = on_chorus.clone()
    dist.broadcast(on_chorus, src=0)
    assert torch.equal(mine, on_chorus), f"rank {rank}: replicas diverged"
    print(f"rank {rank}: DDP {STEPS} steps, max |gloo - chorus| = {diff:.3g}", flush=True)


if __name__ == "__main__":
    main()
