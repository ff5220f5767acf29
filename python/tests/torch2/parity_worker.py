"""One torchrun rank of the 2.x parity check: the three examples' trainings (DDP 20 steps,
FSDP2 10, DP x TP 10) one after another on the default group of --backend; rank 0 saves
every final parameter to --out.

20 and 10 steps, not the examples' 100 and 50: a wrong sum, shard or gather changes the
parameters at the step it happens, far beyond the 1e-12 the check allows, and more steps
only repeat the same collectives; the torchrun launches (torch's import, 2 x (1 + N)
processes) are most of the test's time (np 4 here: 46.5 s with 100/50/50, 37.3 s with
20/10/10, 32.7 s with 1/1/1)."""
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
for name, train, steps in [("ddp", torch2_ddp.train, 20), ("fsdp2", torch2_fsdp2.train, 10),
                           ("dp_x_tp", torch2_dtensor_2d.train, 10)]:
    loss, params = train(steps)
    results[name] = params
    if dist.get_rank() == 0:
        print(f"{args.backend} {name}: {steps} steps, loss {loss:.6f}", flush=True)
if dist.get_rank() == 0:
    torch.save(results, args.out)
dist.destroy_process_group()
