"""FSDP2 (fully_shard) on CPU with backend="chorus", PyTorch 2.x, under torchrun.

    torchrun --nproc-per-node 4 python/examples/torch2_fsdp2.py [--backend chorus] [--steps 50]

Each Linear and the whole MLP are sharded over a 1-D DeviceMesh on "cpu": parameters are
all-gathered (all_gather_into_tensor) before use and gradients reduce-scattered
(reduce_scatter_tensor). Same model and data as torch2_ddp.py, so the final parameters
equal DDP's and gloo's (meson test --suite torch2).
"""
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh

try:  # PyTorch >= 2.6
    from torch.distributed.fsdp import fully_shard
except ImportError:  # 2.4, 2.5
    from torch.distributed._composable.fsdp import fully_shard

from torch2_ddp import batches, main, mlp


def train(steps=50):
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    model = mlp()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss = torch.zeros(())
    for x, y in batches(dist.get_rank(), steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return loss.item(), {n: p.full_tensor().detach().clone() for n, p in model.named_parameters()}


if __name__ == "__main__":
    main(train, 50)
