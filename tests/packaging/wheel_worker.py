"""One rank of the installed-wheel check (tests/packaging/wheel_check.sh), under torchrun.

It never imports chorus_torch: backend "chorus" must come from the wheel's torch.backends
entry point, which torch (>= 2.5) runs at the end of `import torch`. Every result is compared
with its value computed here: all-reduce, all-gather, broadcast, then DDP for a few steps
against one local model trained on all ranks' data at once.
"""
import copy
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group(backend="chorus")
rank, n = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "chorus", dist.get_backend()
assert "chorus_torch" in sys.modules, "chorus_torch was not loaded by torch's autoload"

t = torch.arange(1000, dtype=torch.float32) * (rank + 1)
dist.all_reduce(t)
assert torch.equal(t, torch.arange(1000, dtype=torch.float32) * (n * (n + 1) // 2)), t[:4]

out = [torch.empty(10, dtype=torch.int64) for _ in range(n)]
dist.all_gather(out, torch.full((10,), rank, dtype=torch.int64))
for r in range(n):
    assert torch.equal(out[r], torch.full((10,), r, dtype=torch.int64)), (r, out[r])

b = torch.full((257,), float(rank))
dist.broadcast(b, src=n - 1)
assert torch.equal(b, torch.full((257,), float(n - 1))), b[:4]

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
ref = copy.deepcopy(model)
ddp = DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
per_rank = 4
for step in range(5):
    g = torch.Generator().manual_seed(100 + step)
    x_all, y_all = torch.randn(n * per_rank, 8, generator=g), torch.randn(n * per_rank, 1, generator=g)
    x, y = x_all[rank * per_rank:(rank + 1) * per_rank], y_all[rank * per_rank:(rank + 1) * per_rank]
    opt.zero_grad()
    torch.nn.functional.mse_loss(ddp(x), y).backward()  # DDP averages the ranks' gradients
    opt.step()
    ref_opt.zero_grad()
    torch.nn.functional.mse_loss(ref(x_all), y_all).backward()  # the same mean, in one go
    ref_opt.step()
for p, q in zip(model.parameters(), ref.parameters()):
    assert torch.allclose(p, q, rtol=1e-5, atol=1e-6), (p - q).abs().max()
dist.barrier()
dist.destroy_process_group()
print("rank %d/%d: all_reduce, all_gather, broadcast, DDP 5 steps match" % (rank, n), flush=True)
