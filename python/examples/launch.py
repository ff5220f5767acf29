"""Starts `fn(rank, world_size)` in world_size processes joined by backend="chorus",
like the torch.distributed tutorials do, but meeting through a file rather than a port: a
port found free and then closed can be handed by the kernel to another program before rank
0 binds it, and a rank that meets a stranger's listener waits for torch's store forever."""
import os
import tempfile

import torch.distributed as dist
import torch.multiprocessing as mp

import chorus_torch  # noqa: F401  (registers backend "chorus")


def _run(rank, fn, world_size, init_file):
    dist.init_process_group("chorus", init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size)
    try:
        fn(rank, world_size)
    finally:
        dist.destroy_process_group()


def launch(fn, world_size=2):
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(_run, args=(fn, world_size, os.path.join(d, "rendezvous")), nprocs=world_size,
                 join=True)
