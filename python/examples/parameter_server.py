"""Parameter-server training on torch.distributed (backend "chorus"): rank 0 is the server,
ranks 1..N-1 are workers. The server owns the parameters and the optimizer state (SGD with
momentum); each step a worker sends a small header and its flat gradient with dist.send,
the server takes the next push from whichever worker sent first (dist.recv without src:
Chorus's chorusRecvAnySource), and the worker pulls the fresh parameters with dist.recv.
  sync:  the server waits for one push from every worker, averages them, updates once and
         answers all (the same as data-parallel training);
  async: each push is applied on arrival (weighted 1/workers) and answered at once.
A synthetic 4-class problem (a fixed random teacher network labels Gaussian inputs), so
the example needs no data set. It checks the server's test accuracy in both modes.
    PYTHONPATH=build/python /usr/bin/python3 python/examples/parameter_server.py"""
import torch
import torch.distributed as dist
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from launch import launch

FEATURES, CLASSES, TRAIN, TEST = 20, 4, 4096, 1024
BATCH, EPOCHS, LR, MOMENTUM = 32, 3, 0.05, 0.9
MIN_ACCURACY = 0.90  # measured: sync 0.952, async 0.959 (3 epochs)
PUSH, DONE = 1, 2


def data():
    g = torch.Generator().manual_seed(0)  # the same data set on every rank
    x = torch.randn(TRAIN + TEST, FEATURES, generator=g)
    teacher = torch.randn(FEATURES, CLASSES, generator=g)
    y = (x @ teacher).argmax(dim=1)
    return x[:TRAIN], y[:TRAIN], x[TRAIN:], y[TRAIN:]


def make_model():
    torch.manual_seed(1)  # the same initial parameters on every rank
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, CLASSES))


def serve(model, workers, mode):
    params = parameters_to_vector(model.parameters()).detach().clone()
    momentum = torch.zeros_like(params)
    header = torch.zeros(2, dtype=torch.long)
    live = set(range(1, workers + 1))

    def update(grad):
        momentum.mul_(MOMENTUM).add_(grad)
        params.add_(momentum, alpha=-LR)

    while live:
        if mode == "sync":
            pushes = {}
            while len(pushes) < len(live):
                sender = dist.recv(header)  # any source: the first worker to push
                if header[0].item() == DONE:
                    live.discard(sender)
                    continue
                grad = torch.empty_like(params)
                dist.recv(grad, src=sender)
                pushes[sender] = grad
            if not pushes:
                break
            # The average in worker order, whatever order the pushes came in.
            update(sum(pushes[w] for w in sorted(pushes)) / len(pushes))
            for w in sorted(pushes):
                dist.send(params, dst=w)
        else:
            sender = dist.recv(header)
            if header[0].item() == DONE:
                live.discard(sender)
                continue
            grad = torch.empty_like(params)
            dist.recv(grad, src=sender)
            update(grad / workers)  # W pushes move as far as one sync step
            dist.send(params, dst=sender)
    vector_to_parameters(params, model.parameters())


def work(model, rank, workers):
    x, y, _, _ = data()
    shard = torch.arange(rank - 1, TRAIN, workers)  # this worker's samples
    flat = parameters_to_vector(model.parameters()).detach().clone()
    for epoch in range(EPOCHS):
        order = shard[torch.randperm(len(shard), generator=torch.Generator().manual_seed(epoch))]
        for at in range(0, len(order) - BATCH + 1, BATCH):
            idx = order[at:at + BATCH]
            model.zero_grad()
            torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            grad = parameters_to_vector(p.grad for p in model.parameters())
            dist.send(torch.tensor([PUSH, at], dtype=torch.long), dst=0)
            dist.send(grad, dst=0)
            dist.recv(flat, src=0)  # pull
            vector_to_parameters(flat, model.parameters())
    dist.send(torch.tensor([DONE, 0], dtype=torch.long), dst=0)


def main(rank, world_size):
    workers = world_size - 1
    for mode in ("sync", "async"):
        model = make_model()
        if rank == 0:
            serve(model, workers, mode)
            _, _, tx, ty = data()
            with torch.no_grad():
                accuracy = (model(tx).argmax(dim=1) == ty).float().mean().item()
            print(f"parameter server, {mode}: 1 server + {workers} workers, {EPOCHS} epochs, "
                  f"test accuracy {accuracy:.3f}", flush=True)
            assert accuracy >= MIN_ACCURACY, f"{mode}: accuracy {accuracy:.3f} < {MIN_ACCURACY}"
        else:
            work(model, rank, workers)
        dist.barrier()


if __name__ == "__main__":
    launch(main, 3)
