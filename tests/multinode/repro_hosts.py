#!/usr/bin/env python3
"""Reproducible reductions across namespaced hosts (issue 36, acceptance 1's host part).

Usage: repro_hosts.py --src SRC --build BUILD [--inner]

Brings up 4 namespaced hosts (tools/cluster run: always torn down, also on failure) and,
from inside host 0, launches tests/integration/repro/repro_check (float32, float64,
bfloat16 and float16 all-reduce, reduce and reduce-scatter on mixed-magnitude data) with
chorusrun in these layouts:
  4 ranks: 1 host x 4 (h0:4, shm only), 2 hosts x 2 (h0:2,h1:2: shm inside a host, tcp
           between) and 4 hosts x 1 (every pair over tcp);
  3 ranks: 1 host x 3 and 2 + 1 (h0:2,h1:1);
  6 ranks: 3 hosts x 2 and 2 hosts x 3 (the leaders' rails with a middle host, and with
           three rails).
- CHORUS_REPRODUCIBLE=1: every run passes `--expect exact` (each result bit-identical to
  the rank-order reference computed locally) and every layout of a world size prints the
  same digest.
- Default mode (CHORUS_REPRODUCIBLE=0), 4 ranks, `--expect report`, on 1 x 4, 2 x 2 and
  4 x 1: the 2 x 2 and 4 x 1 runs must not both match the reference (digest equal to the
  reproducible one): their default plans add in other orders, so without the mode the test
  sees other bits. (Logged, not required: whether the one-host default differs from them.)
- The schedule chooser (CHORUS_REPRO_SCHEDULE, src/tuning/ordered_chooser.h) on 2 x 2,
  3 x 2 and 2 x 3: with CHORUS_REPRO_SCHEDULE=random (each rank's figures random and its
  own, a decision every 1-4 calls) repro_check runs float32 and float64 sums of 16 KiB -
  2 MiB 24 times each (`--repeat 24`: every call's bits equal to the first's, the first
  exact); every rank must log the same schedule changes at the same calls, and at least
  three schedules must have run. Then the same with CHORUS_REPRO_SCHEDULE=auto (rank 0's
  real times) on 2 x 2: exact, and the ranks' changes equal.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from multinode import Cluster, expect, log, main_src_build  # noqa: E402

HOSTS = 4
CHECK = "tests/integration/repro/repro_check"
TIMEOUT_S = 240


def digest_of(out):
    m = re.findall(r"digest[ :=]+([0-9a-fA-F]+)", out)
    expect(m, "no digest in repro_check's output:\n" + out[-3000:])
    expect(len(set(m)) == 1, "ranks printed different digests: %s" % sorted(set(m)))
    return m[0]


def spec_of(c, per_host):
    return ",".join("%s:%d" % (c.hosts[h], k) for h, k in enumerate(per_host) if k)


def check_run(c, per_host, reproducible, expect_mode):
    """One launch of repro_check; returns (digest, output)."""
    env = {"CHORUS_REPRODUCIBLE": "1" if reproducible else "0", "CHORUS_TIMEOUT_S": "120"}
    _, out, err, took = c.chorusrun(spec_of(c, per_host),
                                    [c.exe(CHECK), "--expect", expect_mode],
                                    env=env, timeout=TIMEOUT_S)
    d = digest_of(out + err)
    log("%s ranks on %s, CHORUS_REPRODUCIBLE=%d, --expect %s: digest %s (%.1f s)" % (
        sum(per_host), spec_of(c, per_host), reproducible, expect_mode, d, took))
    return d, out + err


def inner(src, build):
    c = Cluster(src, build)
    expect(os.path.exists(c.exe(CHECK)), "%s is not built" % c.exe(CHECK))
    layouts = {4: [[4], [2, 2], [1, 1, 1, 1]], 3: [[3], [2, 1]], 6: [[2, 2, 2], [3, 3]]}
    reference = {}
    for np_, shapes in layouts.items():
        digests = {}
        for shape in shapes:
            digests[spec_of(c, shape)], _ = check_run(c, shape, True, "exact")
        expect(len(set(digests.values())) == 1,
               "reproducible mode, %d ranks: the layouts' digests differ: %s" % (np_, digests))
        reference[np_] = next(iter(digests.values()))
    # Default mode: one host, and the layouts whose plans differ from the one-host plans.
    default = {}
    for shape in [[4], [2, 2], [1, 1, 1, 1]]:
        default[spec_of(c, shape)], out = check_run(c, shape, False, "report")
        log("  its report: " + " | ".join(l.strip() for l in out.splitlines()
                                          if re.search(r"differ", l))[:400])
    expect(any(d != reference[4] for k, d in default.items() if "," in k),
           "default mode gave the rank-order bits in every multi-host layout (%s): the test "
           "cannot tell the reproducible mode from the default" % default)
    log("default mode: %s against the rank-order digest %s" % (default, reference[4]))
    # The schedule chooser: every rank on the same schedule in every call.
    # random (each rank's figures its own: only rank 0's Decision keeps them together) on
    # every shape; auto (rank 0's real times, the same messages) on 2 x 2 only: its 3 x 2
    # and 2 x 3 runs added 14 s to CI and no path random's runs there do not take.
    for shape in [[2, 2], [2, 2, 2], [3, 3]]:
        chooser_run(c, shape, "random")
    chooser_run(c, [2, 2], "auto")


# "... schedule chain8 from call #137" from rank [r] (src/algorithms/ordered.cc)
SCHEDULE_LINE = re.compile(r"\[(\d+)\] chorus INFO .*reproducible all_reduce of (\d+) B "
                           r"\(its bucket\): schedule (\w+) from call #(\d+)")


def chooser_run(c, per_host, mode):
    n = sum(per_host)
    env = {"CHORUS_REPRODUCIBLE": "1", "CHORUS_TIMEOUT_S": "60", "CHORUS_REPRO_SCHEDULE": mode,
           "CHORUS_DEBUG": "INFO", "CHORUS_DEBUG_SUBSYS": "TUNING"}
    # float32 counts of 16, 20, 160, 400 KiB and 1.2 MiB, float64 of 2 MiB: the chooser's
    # buckets from 16 KiB to 4 MiB, each with its own set of schedules
    args = [c.exe(CHECK), "--expect", "exact", "--types", "float32,float64", "--ops", "sum",
            "--colls", "all_reduce", "--registered", "no", "--repeat", "24",
            "--counts", "4096,5000,40000,100000,300000,262144"]
    _, out, err, took = c.chorusrun(spec_of(c, per_host), args, env=env, timeout=TIMEOUT_S)
    changes = {r: [] for r in range(n)}
    for m in SCHEDULE_LINE.finditer(out + err):
        changes[int(m.group(1))].append((int(m.group(4)), int(m.group(2)), m.group(3)))
    expect(changes[0], "CHORUS_REPRO_SCHEDULE=%s on %s: no schedule line (CHORUS_DEBUG=INFO)"
           % (mode, spec_of(c, per_host)))
    for r in range(n):
        expect(changes[r] == changes[0],
               "CHORUS_REPRO_SCHEDULE=%s on %s: rank %d logged other schedule changes than rank "
               "0:\n  rank 0: %s\n  rank %d: %s" % (mode, spec_of(c, per_host), r,
                                                     changes[0][:20], r, changes[r][:20]))
    ran = sorted(set(w for _, _, w in changes[0]))
    if mode == "random":
        expect(len(ran) >= 3, "CHORUS_REPRO_SCHEDULE=random on %s: only %s ran"
               % (spec_of(c, per_host), ran))
    log("CHORUS_REPRO_SCHEDULE=%s on %s: exact, %d schedule changes alike on %d ranks (%s) "
        "(%.1f s)" % (mode, spec_of(c, per_host), len(changes[0]), n, ",".join(ran), took))


def main():
    main_src_build(__file__, "repro_hosts", "rhosts%d" % (os.getpid() % 10000), HOSTS, inner)


if __name__ == "__main__":
    main()
