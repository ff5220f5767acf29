#!/usr/bin/python3
"""A hang, its flight-recorder dumps, and the report that names the culprit.

Usage: test_hang_report.py CHORUSRUN SKIP_CALL HANG_REPORT [unittest args...]

RealHang runs skip_call under chorusrun with 4 ranks (CHORUS_TIMEOUT_S=5 and
CHORUS_FLIGHT_RECORDER_DIR set): rank 2 skips the last of 5 all-reduces (or calls a
broadcast in its place); the others time out; every rank writes its recorder; then
tools/chorus-hang-report must name rank 2 and the sequence numbers. SyntheticDumps feeds
the report hand-made dumps for the cases a real run cannot produce on demand (a dead rank,
a rank stuck in an earlier collective). Standard library only.
"""

import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

CHORUSRUN = SKIP_CALL = REPORT = None
PY = sys.executable or "/usr/bin/python3"


def report(d):
    p = subprocess.run([PY, REPORT, d], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=60)
    return p.returncode, p.stdout


def run_job(d, *args):
    env = dict(os.environ)
    env.update({"CHORUS_TIMEOUT_S": "5", "CHORUS_FLIGHT_RECORDER_DIR": d,
                "CHORUS_DEBUG": "WARN"})
    env.pop("CHORUS_CHECK_MODE", None)
    p = subprocess.run([CHORUSRUN, "--timeout", "120", "-np", "4", SKIP_CALL] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, env=env, timeout=180)
    return p.returncode, p.stdout


class RealHang(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="chorus-fr-test-")
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def job(self, *args):
        rc, out = run_job(self.dir, *args)
        self.assertEqual(rc, 0, "skip_call job failed:\n" + out)
        dumps = sorted(glob.glob(os.path.join(self.dir, "chorus-fr-*-rank*.json")))
        self.assertEqual(len(dumps), 4, "expected one dump per rank, got %s\n%s" % (dumps, out))
        return out

    def test_skipped_call(self):
        out = self.job("--mode", "skip", "--victim", "2", "--calls", "5")
        # Each survivor's error names the sequence number and the rank it waited for.
        for r in (0, 1, 3):
            self.assertRegex(out, r"rank %d: last call: timed out.*#5.*rank 2" % r, out)
        rc, text = report(self.dir)
        self.assertEqual(rc, 0, text)
        self.assertIn("culprit: rank 2\n", text)
        self.assertIn("rank 2 never entered all_reduce #5 (its last operation is "
                      "all_reduce #4, completed)", text)
        self.assertIn("ranks 0,1,3 are waiting in all_reduce #5", text)
        self.assertIn("rank 0 waits for data from rank 2", text)
        # The recorder itself: the survivors' last operation failed with a timeout.
        d = json.load(open(glob.glob(os.path.join(self.dir, "*-rank0.json"))[0]))
        last = [o for o in d["ops"] if o["kind"] == "coll"][-1]
        self.assertEqual((last["seq"], last["coll"], last["state"], last["result"]),
                         (5, "all_reduce", "failed", "timeout"), d)
        self.assertEqual(last["wait_peer"], 2)

        # The same dumps without rank 2's: a rank that died leaves none.
        for f in glob.glob(os.path.join(self.dir, "*-rank2.json")):
            os.unlink(f)
        rc, text = report(self.dir)
        self.assertIn("culprit: rank 2\n", text)
        self.assertIn("rank 2 left no dump", text)

    def test_other_collective(self):
        self.job("--mode", "other", "--victim", "2", "--calls", "5")
        rc, text = report(self.dir)
        self.assertEqual(rc, 0, text)
        self.assertIn("culprit: rank 2\n", text)
        self.assertIn("rank 2 called broadcast(count=1024, float32, root=0) as #5 where "
                      "ranks 0,1,3 called all_reduce(count=1024, float32, sum)", text)


def op(seq, coll, state, wait_peer=-1, count=1024, kind="coll", root=-1, op_="sum"):
    return {"id": seq, "seq": seq, "kind": kind, "coll": coll, "type": "float32",
            "count": count, "op": op_ if coll in ("all_reduce", "reduce") else "-",
            "root": root, "state": state,
            "result": "success" if state == "completed" else "timeout",
            "wait_peer": wait_peer, "wait_for": "data" if wait_peer >= 0 else "",
            "t_enqueue_ns": 1, "t_start_ns": 2, "t_end_ns": 3 if state == "completed" else 0}


def dump(rank, nranks, ops):
    return {"format": "chorus-flight-recorder/1", "comm_hash": "00000000000000aa",
            "comm_name": "", "rank": rank, "nranks": nranks, "pid": 100 + rank,
            "host": "h", "reason": "test", "last_collective_seq": 0, "last_p2p_seq": 0,
            "capacity": 1024, "recorded": len(ops), "last_error": "", "ops": ops}


class SyntheticDumps(unittest.TestCase):
    def write(self, dumps):
        self.tmp = tempfile.TemporaryDirectory(prefix="chorus-fr-synth-")
        for d in dumps:
            with open(os.path.join(self.tmp.name, "chorus-fr-%s-rank%d.json" % (
                    d["comm_hash"], d["rank"])), "w") as f:
                json.dump(d, f)
        rc, text = report(self.tmp.name)
        self.tmp.cleanup()
        self.assertEqual(rc, 0, text)
        return text

    def test_stuck_in_earlier_collective(self):
        base = [op(40, "all_reduce", "completed")]
        dumps = [dump(r, 4, base + [op(41, "broadcast", "completed", root=0),
                                    op(42, "all_reduce", "failed", wait_peer=3)])
                 for r in range(3)]
        dumps.append(dump(3, 4, base + [op(41, "broadcast", "started", wait_peer=0, root=0)]))
        text = self.write(dumps)
        self.assertIn("culprit: rank 3\n", text)
        self.assertIn("rank 3 is in broadcast #41 (rank 3 waits for data from rank 0), "
                      "which ranks 0,1,2 completed", text)
        self.assertIn("ranks 0,1,2 are waiting in all_reduce #42", text)

    def test_mismatched_counts(self):
        dumps = [dump(r, 2, [op(7, "all_reduce", "failed", wait_peer=1 - r,
                                count=1024 if r == 0 else 2048)]) for r in range(2)]
        text = self.write(dumps)
        self.assertIn("culprit: mismatched calls", text)
        self.assertIn("rank 0 called all_reduce(count=1024, float32, sum) as #7", text)
        self.assertIn("rank 1 called all_reduce(count=2048, float32, sum) as #7", text)

    def test_empty_dir(self):
        with tempfile.TemporaryDirectory() as d:
            rc, text = report(d)
        self.assertEqual(rc, 2, text)
        self.assertIn("no flight-recorder dumps", text)


def main():
    global CHORUSRUN, SKIP_CALL, REPORT
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    CHORUSRUN, SKIP_CALL, REPORT = sys.argv[1:4]
    unittest.main(argv=[sys.argv[0]] + sys.argv[4:], verbosity=2)


if __name__ == "__main__":
    sys.exit(main())
