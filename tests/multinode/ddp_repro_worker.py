"""One rank of the DDP reproducibility check (tests/multinode/torch_repro_hosts.py), started
by chorusrun: trains a small float32 model for a few steps with DistributedDataParallel on
backend chorus and prints `hash <sha256>` of every step's gradients and the final
parameters (the same on every rank: they all hold the all-reduced gradients).

Usage: python ddp_repro_worker.py MODE ADDR:PORT
  MODE deterministic  torch.use_deterministic_algorithms(True) before the process group
       default        neither determinism nor an option: the library's default plans
       option         (torch 2.x) init_process_group(pg_options={"reproducible": True})
       option_off     determinism on, but pg_options={"reproducible": False}
ADDR:PORT is the c10d store (rank 0 serves it); rank and size come from chorusrun.

The data are of mixed magnitude (inputs and targets scaled by 10^-3 .. 10^3 per row), so
the gradients' sums change in their last bits when the order of the additions changes;
the gradient buckets are 16 KiB to a few hundred KiB, sizes whose default plans differ
between one host and two.
"""
import faulthandler
import hashlib
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import chorus_torch  # noqa: F401  (registers backend "chorus")

STEPS = 4


def main():
    faulthandler.dump_traceback_later(170, exit=False)
    mode, addr = sys.argv[1], sys.argv[2]
    rank, size = int(os.environ["CHORUS_RANK"]), int(os.environ["CHORUS_WORLD_SIZE"])
    kw = {}
    if mode in ("deterministic", "option_off"):
        torch.use_deterministic_algorithms(True)
    if mode in ("option", "option_off"):
        kw["pg_options"] = {"reproducible": mode == "option"}
    dist.init_process_group("chorus", init_method="tcp://" + addr, rank=rank,
                            world_size=size, **kw)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(),
                          nn.Linear(256, 16))
    ddp = DDP(model, bucket_cap_mb=0.25)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1000 + rank)
    h = hashlib.sha256()
    for _ in range(STEPS):
        scale = 10.0 ** torch.randint(-3, 4, (32, 1), generator=g).float()
        x = torch.randn(32, 64, generator=g) * scale
        y = torch.randn(32, 16, generator=g) * scale
        opt.zero_grad()
        nn.functional.mse_loss(ddp(x), y).backward()
        for p in model.parameters():
            h.update(p.grad.detach().numpy().tobytes())
        opt.step()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    print("rank %d: mode %s, torch %s, %d steps: hash %s" % (
        rank, mode, torch.__version__, STEPS, h.hexdigest()), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
