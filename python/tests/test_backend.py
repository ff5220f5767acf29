"""chorus vs gloo over 2 and 4 real processes, for env://, file:// and tcp:// rendezvous."""
import os
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(script, n, init, tmp_path, extra=(), timeout=180):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    if init == "file":
        init = f"file://{tmp_path}/rendezvous"
    elif init == "tcp":
        init = f"tcp://127.0.0.1:{free_port()}"
    else:
        init = "env://"
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, script), str(r), str(n), init, *extra],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(n)]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout)[0])
    except subprocess.TimeoutExpired:
        # A hang: every rank's output (each dumped its Python stacks at its own deadline,
        # see worker_watchdog) is what tells where it stopped.
        for p in procs:
            p.kill()
        report = [f"rank {r}:\n{p.communicate()[0][-4000:]}" for r, p in enumerate(procs)]
        pytest.fail(f"{script} np {n} {init}: a rank outlived {timeout} s\n" + "\n".join(report))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for r, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {r} exited with {p.returncode}:\n{out[-4000:]}"
    return outs


@pytest.mark.parametrize("n,init", [(2, "file"), (4, "env"), (2, "tcp")])
def test_every_op_matches_gloo(n, init, tmp_path):
    outs = run_ranks("ops_worker.py", n, init, tmp_path)
    assert all("all checks passed" in o for o in outs)


@pytest.mark.parametrize("n", [2, 4])
def test_ddp_matches_gloo(n, tmp_path):
    outs = run_ranks("ddp_worker.py", n, "env", tmp_path)
    assert all("DDP 100 steps" in o for o in outs), outs
