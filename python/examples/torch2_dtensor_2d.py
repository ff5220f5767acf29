"""A 2-D DeviceMesh on CPU (data parallel x tensor parallel) with DTensor, backend="chorus".

    torchrun --nproc-per-node 4 python/examples/torch2_dtensor_2d.py [--backend chorus] [--steps 50]

The mesh is (world/2) x 2, dims "dp" and "tp". The first two Linears are tensor-parallel
over "tp" (column-wise then row-wise: the hidden activations stay sharded, one all-reduce
per forward), then the whole model is sharded with FSDP2 over "dp". Ranks of one tp group
see the same data. Prints the parameters' checksum: the same with --backend gloo.
"""
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

try:  # PyTorch >= 2.6
    from torch.distributed.fsdp import fully_shard
except ImportError:  # 2.4, 2.5
    from torch.distributed._composable.fsdp import fully_shard

from torch2_ddp import batches, main, mlp


def train(steps=50):
    world = dist.get_world_size()
    assert world % 2 == 0, "needs an even number of ranks (tp = 2)"
    mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "tp"))
    model = mlp()
    parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss = torch.zeros(())
    for x, y in batches(mesh["dp"].get_local_rank(), steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return loss.item(), {n: p.full_tensor().detach().clone() for n, p in model.named_parameters()}


if __name__ == "__main__":
    main(train, 50)
