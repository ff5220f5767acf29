"""meson test torch2_parity_npN: DDP (20 steps), FSDP2 (10) and a DP x TP DeviceMesh (10)
on a float64 MLP under torchrun, with backend gloo and then chorus; every final parameter
must agree within 1e-12 (relative, max-norm)."""
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests"))
from ports import free_port  # noqa: E402
TOL = 1e-12


def run(backend, n, out):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(n),
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
           os.path.join(HERE, "parity_worker.py"), "--backend", backend, "--out", out]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    print(r.stdout[-6000:] if r.returncode else "".join(
        line + "\n" for line in r.stdout.splitlines() if " steps, loss " in line), end="")
    if r.returncode:
        sys.exit(f"torchrun with backend {backend} on {n} ranks failed ({r.returncode})")
    return torch.load(out)


def main():
    n = int(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        ref = run("gloo", n, os.path.join(tmp, "gloo.pt"))
        got = run("chorus", n, os.path.join(tmp, "chorus.pt"))
    worst = 0.0
    for mode, params in ref.items():
        assert params.keys() == got[mode].keys(), (mode, params.keys(), got[mode].keys())
        for name, p in params.items():
            q = got[mode][name]
            assert p.dtype == torch.float64 and q.shape == p.shape, (mode, name)
            rel = ((q - p).abs().max() / p.abs().max().clamp_min(1e-300)).item()
            worst = max(worst, rel)
            print(f"{mode:8s} {name:24s} max rel diff {rel:.3e}")
            assert rel <= TOL, f"{mode} {name}: chorus differs from gloo by {rel:.3e} > {TOL}"
    print(f"np {n}: DDP, FSDP2 and DP x TP parameters match gloo (worst {worst:.3e} <= {TOL})")


if __name__ == "__main__":
    main()
