"""DistributedDataParallel on CPU with backend="chorus", PyTorch 2.x, under torchrun.

    torchrun --nproc-per-node 4 python/examples/torch2_ddp.py [--backend chorus] [--steps 100]

(PYTHONPATH=build/python/torch2 and the .venv-torch2 Python: see docs/TORCH.md.) A small
float64 MLP, every rank its own data; prints the loss and a checksum of the parameters,
which are the same with --backend gloo (meson test --suite torch2 checks it).
"""
import argparse
import datetime
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import chorus_torch  # noqa: F401  (registers backend "chorus")

IN, HIDDEN, OUT = 32, 64, 8


def mlp():
    torch.manual_seed(0)  # the same initial parameters on every rank
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
                         nn.Linear(HIDDEN, OUT)).double()


def batches(seed, steps, batch=16):
    g = torch.Generator().manual_seed(1000 + seed)
    for _ in range(steps):
        x = torch.randn(batch, IN, generator=g, dtype=torch.float64)
        yield x, torch.sin(x[:, :OUT]) + 0.1 * torch.randn(batch, OUT, generator=g, dtype=torch.float64)


def train(steps=100):
    """DDP over the default group; returns (last loss, {name: full parameter})."""
    # Small buckets: several all-reduces per step, overlapped with the backward pass.
    model = DDP(mlp(), bucket_cap_mb=0.01)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss = torch.zeros(())
    for x, y in batches(dist.get_rank(), steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return loss.item(), {n: p.detach().clone() for n, p in model.module.named_parameters()}


def main(train_fn, default_steps):
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="chorus")
    ap.add_argument("--steps", type=int, default=default_steps)
    ap.add_argument("--out", help="rank 0 saves the final parameters here (torch.save)")
    args = ap.parse_args()
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=120))
    try:
        loss, params = train_fn(args.steps)
        if dist.get_rank() == 0:
            total = sum(p.double().abs().sum().item() for p in params.values())
            print(f"{os.path.basename(__import__('sys').argv[0])}: backend={args.backend} "
                  f"world={dist.get_world_size()} steps={args.steps} loss={loss:.6f} "
                  f"sum|params|={total:.12f}", flush=True)
            if args.out:
                torch.save(params, args.out)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(train, 100)
