#!/usr/bin/env python3
"""DDP gradients on backend chorus, one host against two (issue 36, acceptance 4).

Usage: torch_repro_hosts.py --src SRC --build BUILD --python PY --module-dir DIR [--inner]

Brings up 2 namespaced hosts (tools/cluster run: always torn down) and runs
tests/multinode/ddp_repro_worker.py (a float32 model, 4 DDP steps on mixed-magnitude data)
under chorusrun as 4 ranks on one host (h0:4) and as 2 hosts x 2 (h0:2,h1:2), with the
Python PY (whose torch the module in DIR was built for):
- torch.use_deterministic_algorithms(True): the backend uses the reproducible mode, and
  the hash of every step's gradients and the final parameters is the same in both
  layouts;
- the control, without determinism: the default plans give another hash on 2 x 2 with
  CHORUS_ALGO=ring than on one host (else the check above could not fail). Not the
  default plans alone: at these sizes 1 x 4 (halving on the pair cells) and 2 x 2 (each
  host's sum, then the leaders') both add (x0 + x1) + (x2 + x3), the same bits;
- torch 2.x only (the extended API hands the backend init_process_group's pg_options):
  pg_options={"reproducible": True} without determinism gives the deterministic hash, and
  {"reproducible": False} with determinism gives the control's hash on 2 x 2.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from multinode import Cluster, expect, log, main_in_cluster  # noqa: E402

WORKER = os.path.join(HERE, "ddp_repro_worker.py")
PORT = 29000 + os.getpid() % 1000


def run(c, py, moddir, per_host, mode, extra_env=None):
    spec = ",".join("%s:%d" % (c.hosts[h], k) for h, k in enumerate(per_host) if k)
    env = {"PYTHONPATH": moddir, "CHORUS_TIMEOUT_S": "120", **(extra_env or {})}
    env.pop("CHORUS_REPRODUCIBLE", None)
    addr = "%s.1:%d" % (c.subnet, PORT)  # host 0 serves the store (rank 0 runs there)
    exports = [a for k in sorted(env) if k != "CHORUS_TIMEOUT_S" for a in ("-x", k)]
    _, out, err, took = c.chorusrun(spec, exports + [py, WORKER, mode, addr],
                                    env=env, timeout=240)
    hashes = re.findall(r"hash ([0-9a-f]{64})", out)
    expect(len(hashes) == sum(per_host), "want a hash per rank:\n%s\n%s" % (out[-3000:],
                                                                             err[-3000:]))
    expect(len(set(hashes)) == 1, "the ranks' models differ: %s" % hashes)
    log("%s on %s %s: %s (%.1f s)" % (mode, spec, extra_env or "", hashes[0][:16], took))
    return hashes[0]


def inner(src, build, py, moddir):
    c = Cluster(src, build)
    os.environ.pop("CHORUS_REPRODUCIBLE", None)  # the modes below decide
    one, two = [4], [2, 2]
    det_one = run(c, py, moddir, one, "deterministic")
    det_two = run(c, py, moddir, two, "deterministic")
    expect(det_one == det_two, "deterministic: 1 x 4 and 2 x 2 differ (%s, %s)" % (
        det_one[:16], det_two[:16]))
    ring = {"CHORUS_ALGO": "ring"}  # another order than both layouts' default (docstring)
    ctl_one = run(c, py, moddir, one, "default")
    ctl_two = run(c, py, moddir, two, "default", ring)
    expect(ctl_one != ctl_two, "control: without determinism 1 x 4 and 2 x 2 (ring) gave the "
           "same hash (%s): the check cannot tell the modes apart at these sizes" % ctl_one[:16])
    v = subprocess.run([py, "-c", "import torch; print(torch.__version__.split('.')[0])"],
                       capture_output=True, text=True)
    if v.stdout.strip() not in ("0", "1"):
        opt_two = run(c, py, moddir, two, "option")
        expect(opt_two == det_two, "pg_options reproducible=True: %s, want %s" % (
            opt_two[:16], det_two[:16]))
        off_two = run(c, py, moddir, two, "option_off", ring)
        expect(off_two == ctl_two, "pg_options reproducible=False: %s, want the control's %s" % (
            off_two[:16], ctl_two[:16]))


def main():
    args = sys.argv[1:]

    def arg(name):
        return os.path.abspath(args[args.index(name) + 1])

    src, build, py, moddir = arg("--src"), arg("--build"), arg("--python"), arg("--module-dir")
    main_in_cluster(__file__, "torch_repro_hosts", "rhoststorch%d" % (os.getpid() % 1000), 2,
                    src, ["--src", src, "--build", build, "--python", py, "--module-dir", moddir],
                    lambda: inner(src, build, py, moddir))


if __name__ == "__main__":
    main()
