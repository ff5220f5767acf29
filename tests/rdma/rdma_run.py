#!/usr/bin/env python3
"""rdma_run.py — what the shipped library (libibverbs build) does on this host.

--mode choice: two processes with CHORUS_SHM_DISABLE=1 (so the pair is a network pair).
  No RDMA device (our machines): every rank logs exactly one INFO line
  "no RDMA device (...); using tcp", the pair connects via tcp and all_reduce_perf -c 1
  reports no wrong value. With a device: the pair connects via rdma instead. Then with
  CHORUS_IB_DISABLE=1: "RDMA disabled ..." and tcp, device or not.
--mode hardware: the real transport on real hardware. Exits 77 (SKIP) with the reason
  when ibv_get_device_list finds no device (what `ibv_devices` would list); otherwise runs
  the collective checker (coll_proc_main) on 2 and 3 ranks and an all-reduce sweep to
  64 MiB with -c 1, and requires every pair to connect via rdma.
"""
import argparse
import os
import re
import subprocess
import sys

SKIP = 77


def run(cmd, extra_env, timeout):
    env = dict(os.environ)
    env.update(extra_env)
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout, text=True)
    return p.returncode, p.stdout


def fail(msg, out=""):
    print("FAIL:", msg)
    if out:
        print("---- output ----")
        print(out[-6000:])
    sys.exit(1)


def probe(args):
    p = subprocess.run([args.probe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    devices = [l for l in p.stdout.splitlines() if l.strip()]
    return p.returncode, devices, p.stderr.strip()


def pair_lines(out, transport, n):
    want = {(a, b) for a in range(n) for b in range(n) if a != b}
    got = set()
    for m in re.finditer(r"rank (\d+) -> rank (\d+) via (\w+)", out):
        if m.group(3) != transport:
            fail("rank %s -> rank %s went via %s, expected %s" % (m.group(1), m.group(2),
                                                                 m.group(3), transport), out)
        got.add((int(m.group(1)), int(m.group(2))))
    if got != want:
        fail("expected a 'via %s' line for every pair %s, saw %s" % (transport, sorted(want),
                                                                    sorted(got)), out)


def perf_ok(out):
    if "# Out of bounds values : 0 OK" not in out:
        fail("all_reduce_perf -c 1 reported wrong values", out)


def mode_choice(args):
    if args.ibverbs != "1":
        print("SKIP: built without libibverbs (-Dibverbs=disabled): no rdma transport to choose")
        sys.exit(SKIP)
    rc, devices, why = probe(args)
    env = {"CHORUS_DEBUG": "INFO", "CHORUS_DEBUG_SUBSYS": "INIT,NET", "CHORUS_SHM_DISABLE": "1"}
    cmd = [args.chorusrun, "-np", "2", args.perf, "-b", "8", "-e", "1M", "-f", "4", "-c", "1"]
    code, out = run(cmd, env, 120)
    if code != 0:
        fail("all_reduce_perf exited with %d" % code, out)
    perf_ok(out)
    if devices:
        print("devices present (%s): expecting rdma" % ", ".join(devices))
        pair_lines(out, "rdma", 2)
    else:
        print("no device (%s): expecting one INFO line per rank and tcp" % why)
        for r in range(2):
            lines = [l for l in out.splitlines()
                     if "[%d] chorus INFO" % r in l and "no RDMA device (" in l]
            if len(lines) != 1 or not lines[0].rstrip().endswith("; using tcp"):
                fail("rank %d: expected one 'no RDMA device (...); using tcp' line, got %r"
                     % (r, lines), out)
        if "WARN" in out:
            fail("a warning was logged where the missing device is a plain fact", out)
        pair_lines(out, "tcp", 2)
    env["CHORUS_IB_DISABLE"] = "1"
    code, out = run(cmd, env, 120)
    if code != 0:
        fail("with CHORUS_IB_DISABLE=1 all_reduce_perf exited with %d" % code, out)
    perf_ok(out)
    if out.count("RDMA disabled by CHORUS_IB_DISABLE=1; using tcp") != 2:
        fail("expected one 'RDMA disabled' line per rank", out)
    pair_lines(out, "tcp", 2)
    print("PASS")


def mode_hardware(args):
    rc, devices, why = probe(args)
    if not devices:
        print("SKIP: no RDMA device on this host (%s): the real rdma transport cannot run here"
              % (why or "none listed"))
        sys.exit(SKIP)
    print("RDMA devices: %s" % ", ".join(devices))
    env = {"CHORUS_DEBUG": "INFO", "CHORUS_DEBUG_SUBSYS": "INIT,NET", "CHORUS_SHM_DISABLE": "1"}
    for n in (2, 3):
        code, out = run([args.chorusrun, "-np", str(n), args.coll, "--big", "none"], env, 280)
        if code != 0:
            fail("coll_proc_main on %d ranks over rdma exited with %d" % (n, code), out)
        pair_lines(out, "rdma", n)
        print("coll_proc_main np %d over rdma: PASS" % n)
    code, out = run([args.chorusrun, "-np", "2", args.perf, "-b", "8", "-e", "64M", "-f", "2",
                     "-c", "1"], env, 280)
    if code != 0:
        fail("all_reduce_perf over rdma exited with %d" % code, out)
    perf_ok(out)
    pair_lines(out, "rdma", 2)
    print("\n".join(l for l in out.splitlines() if not l.startswith(("vm", "#")) or "Avg" in l))
    print("PASS")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chorusrun", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--perf", required=True)
    ap.add_argument("--coll", required=True)
    ap.add_argument("--ibverbs", default="1")
    ap.add_argument("--mode", choices=["choice", "hardware"], required=True)
    args = ap.parse_args()
    (mode_choice if args.mode == "choice" else mode_hardware)(args)


if __name__ == "__main__":
    main()
