"""Starts `fn(rank, world_size)` in world_size processes joined by backend="chorus"
(env:// rendezvous on a free local port), like the torch.distributed tutorials do."""
import os
import socket

import torch.distributed as dist
import torch.multiprocessing as mp

import chorus_torch  # noqa: F401  (registers backend "chorus")


def _run(rank, fn, world_size):
    dist.init_process_group("chorus", rank=rank, world_size=world_size)
    try:
        fn(rank, world_size)
    finally:
        dist.destroy_process_group()


def launch(fn, world_size=2):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    mp.spawn(_run, args=(fn, world_size), nprocs=world_size, join=True)
