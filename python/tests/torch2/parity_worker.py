"""One torchrun rank of the 2.x parity check: the three examples' trainings (DDP 100 steps,
FSDP2 50, DP x TP 50) one after another on the default group of --backend; rank 0 saves
every final parameter to --out."""
import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.environ.get("CHORUS_TORCH_EXAMPLES",
                                  os.path.join(os.path.dirname(__file__), "..", "..", "examples")))
import torch2_ddp  # noqa: E402
import torch2_dtensor_2d  # noqa: E402
import torch2_fsdp2  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--backend", required=True)
ap.add_argument("--out", required=True)
args = ap.parse_args()

dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=120))
results = {}
for name, train, steps in [("ddp", torch2_ddp.train, 100), ("fsdp2", torch2_fsdp2.train, 50),
                           ("dp_x_tp", torch2_dtensor_2d.train, 50)]:
    loss, params = train(steps)
    results[name] = params
    if dist.get_rank() == 0:
        print(f"{args.backend} {name}: {steps} steps, loss {loss:.6f}", flush=True)
if dist.get_rank() == 0:
    torch.save(results, args.out)
dist.destroy_process_group()
