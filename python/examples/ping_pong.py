"""Point-to-point ping-pong between rank 0 and rank 1 (blocking send/recv), with the
round-trip time.   PYTHONPATH=build/python /usr/bin/python3 python/examples/ping_pong.py"""
import time

import torch
import torch.distributed as dist

from launch import launch

ROUNDS = 1000


def ping_pong(rank, world_size):
    ball = torch.zeros(1)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(ROUNDS):
        if rank == 0:
            ball += 1
            dist.send(ball, dst=1)
            dist.recv(ball, src=1)
        else:
            dist.recv(ball, src=0)
            ball += 1
            dist.send(ball, dst=0)
    if rank == 0:
        assert ball.item() == 2 * ROUNDS, ball
        print(f"ping-pong: {ROUNDS} round trips, ball = {int(ball.item())}, "
              f"{(time.perf_counter() - t0) / ROUNDS * 1e6:.1f} µs per round trip")


if __name__ == "__main__":
    launch(ping_pong, 2)
