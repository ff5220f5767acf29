#!/usr/bin/env python3
"""chorusrun --bind-to: each local rank on a core of its own when there are enough cores.

Usage: test_binding.py /path/to/chorusrun

The expected sets are computed here, independently of chorusrun, from this process's own
CPU affinity and /sys's core topology; each rank reports the set the kernel gives it
(/proc/self/status Cpus_allowed_list).
"""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpusets import cores, parse_list  # noqa: E402

CHORUSRUN = None

REPORT = 'echo "$CHORUS_LOCAL_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"'


def run(args):
    p = subprocess.run([CHORUSRUN] + args + ["sh", "-c", REPORT], capture_output=True,
                       text=True, timeout=60)
    sets = {}
    for line in p.stdout.splitlines():
        rank, cpus = line.split(None, 1)
        sets[int(rank)] = parse_list(cpus)
    return p.returncode, sets, p.stderr


class BindingTest(unittest.TestCase):
    def test_auto_binds_each_rank_to_its_own_core(self):
        cs = cores()
        rc, sets, err = run(["-np", "2"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(sets), [0, 1])
        for r in range(2):  # (one core: more ranks than cores, unbound)
            want = cs[r] if len(cs) >= 2 else set(os.sched_getaffinity(0))
            self.assertEqual(sets[r], want, "local rank %d gets core %d's CPUs" % (r, r))

    def test_auto_leaves_a_lone_rank_unbound(self):
        # No rank of its job to collide with; namespaced hosts on one kernel would all bind
        # theirs to core 0 (tests/multinode/binding_hosts.py checks the hosts).
        rc, sets, err = run(["-np", "1"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sets, {0: set(os.sched_getaffinity(0))})
        rc, sets, err = run(["--bind-to", "core", "-np", "1"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sets, {0: cores()[0]}, "asked for, a lone rank is bound")

    def test_core_gives_disjoint_cores_to_every_rank(self):
        cs = cores()
        rc, sets, err = run(["--bind-to", "core", "-np", str(len(cs))])
        self.assertEqual(rc, 0, err)
        self.assertEqual([sets[r] for r in range(len(cs))], cs)

    def test_auto_with_more_ranks_than_cores_runs_them_unbound(self):
        allowed = set(os.sched_getaffinity(0))
        n = len(cores()) + 1
        rc, sets, err = run(["-np", str(n)])
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(sets), n)
        for r in range(n):
            self.assertEqual(sets[r], allowed)
        self.assertNotIn("bind", err, "auto stays quiet when it cannot bind")
    def test_core_with_more_ranks_than_cores_shares_them_round_robin(self):
        cs = cores()
        n = 2 * len(cs) + 1
        rc, sets, err = run(["--bind-to", "core", "-np", str(n)])
        self.assertEqual(rc, 0, err)
        self.assertIn("share the cores round robin", err)
        self.assertEqual(len(sets), n)
        for r in range(n):
            self.assertEqual(sets[r], cs[r % len(cs)], "local rank %d on core %d" % (r, r % len(cs)))

    def test_none_leaves_placement_to_the_kernel(self):
        allowed = set(os.sched_getaffinity(0))
        rc, sets, err = run(["--bind-to", "none", "-np", "2"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sets, {0: allowed, 1: allowed})

    def test_bad_value_is_a_usage_error(self):
        p = subprocess.run([CHORUSRUN, "--bind-to", "socket", "-np", "2", "true"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("invalid --bind-to 'socket'", p.stderr)
        p = subprocess.run([CHORUSRUN, "-np", "2", "true", "--bind-to"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(p.returncode, 0, "after the command, --bind-to is the command's")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: %s /path/to/chorusrun" % sys.argv[0])
    CHORUSRUN = sys.argv[1]
    unittest.main(argv=[sys.argv[0]] + sys.argv[2:], verbosity=2)
