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


def main():
    main_src_build(__file__, "repro_hosts", "rhosts%d" % (os.getpid() % 10000), HOSTS, inner)


if __name__ == "__main__":
    main()
