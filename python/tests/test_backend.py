"""chorus vs gloo over 2 and 4 real processes, for env://, file:// and tcp:// rendezvous."""
import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))
from ports import free_port  # noqa: E402


def run_ranks(script, n, init, tmp_path, extra=(), timeout=180, grace=20):
    """Runs n ranks of script; returns their outputs. When a rank fails, the others get
    `grace` seconds to fail on their own (their messages say more) and are then killed,
    rather than waiting out the whole timeout for a peer that is gone."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    if init == "file":
        init = f"file://{tmp_path}/rendezvous"
    elif init == "tcp":
        init = f"tcp://127.0.0.1:{free_port()}"
    else:
        init = "env://"
    logs = [open(tmp_path / f"rank{r}.log", "w+") for r in range(n)]
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, script), str(r), str(n), init, *extra],
                              env=env, stdout=logs[r], stderr=subprocess.STDOUT, text=True)
             for r in range(n)]
    deadline = time.monotonic() + timeout
    try:
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            if any(p.returncode not in (None, 0) for p in procs):
                deadline = min(deadline, time.monotonic() + grace)
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    outs = []
    for f in logs:
        f.seek(0)
        outs.append(f.read())
        f.close()
    # A hung rank dumped its Python stacks at its own deadline (see the workers' watchdog).
    report = "\n".join(f"rank {r} (exit {p.returncode}):\n{out[-4000:]}"
                        for r, (p, out) in enumerate(zip(procs, outs)))
    assert all(p.returncode == 0 for p in procs), f"{script} np {n} {init}:\n{report}"
    return outs


@pytest.mark.parametrize("n,init", [(2, "file"), (4, "env"), (2, "tcp")])
def test_every_op_matches_gloo(n, init, tmp_path):
    outs = run_ranks("ops_worker.py", n, init, tmp_path)
    assert all("all checks passed" in o for o in outs)


@pytest.mark.parametrize("n", [2, 4])
def test_ddp_matches_gloo(n, tmp_path):
    outs = run_ranks("ddp_worker.py", n, "env", tmp_path)
    assert all("DDP 100 steps" in o for o in outs), outs
