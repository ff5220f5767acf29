"""meson test torch2_ops_npN: the 1.13 backend's every-operation check against gloo
(../ops_worker.py: each collective, dtype and reduction, p2p, batched p2p, barriers,
timeouts) on N processes of the PyTorch 2.x module (env:// rendezvous)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests"))
from ports import free_port  # noqa: E402


def main():
    n = int(sys.argv[1])
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    worker = os.path.join(HERE, "..", "ops_worker.py")
    procs = [subprocess.Popen([sys.executable, worker, str(r), str(n), "env://"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(n)]
    failed = False
    for r, p in enumerate(procs):
        try:
            out = p.communicate(timeout=240)[0]
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out = p.communicate()[0] + "\n(timed out)"
        ok = p.returncode == 0 and "all checks passed" in out
        print(f"rank {r}: {'all checks passed' if ok else 'FAILED'}")
        if not ok:
            failed = True
            print(out[-4000:])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
