#!/usr/bin/env python3
"""Survive a lost rank: start N ranks of shrink_worker, let the victims die, check the rest.

Usage: shrink_test.py --worker PATH --mode kill|healthy|bad [--np 4] [--victims 1]
                      [--timeout-s 3]

No launcher: this script starts every rank itself (CHORUS_RANK / CHORUS_WORLD_SIZE /
CHORUS_INIT=tcp://127.0.0.1:PORT), so a rank's death is seen by the library alone. What it
requires (see shrink_worker.cc for the ranks' side):
  kill     the last rank SIGKILLs itself (exit by SIGKILL); every survivor's call fails
           within CHORUS_TIMEOUT_S + 5 s of the kill, after chorusCommRevoke the next call
           returns chorusAborted at once, chorusCommFailedRanks gives the same
           list on every survivor (the dead rank), the shrink succeeds and 100 rounds of every
           collective on the smaller communicator are exact; --victims K repeats it K times
           (4 -> 3 -> 2).
  healthy  the last rank is alive and idle; the others shrink it away (the new
           communicator's init non-blocking) and check.
  bad      every bad list fails with chorusInvalidArgument on every rank that passed it;
           afterwards the parent still works and a good shrink succeeds.
Always: every process exits as expected within the time limit, and /dev/shm holds nothing
new named chorus-*. multinode.py reuses run() with per-rank command prefixes
(tools/cluster exec ...) to run the same across namespaced hosts.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from ports import free_port  # noqa: E402  (a port no other socket is handed meanwhile)


class Failure(Exception):
    pass


def log(msg):
    print("shrink_test: " + msg, flush=True)


class Rank:
    def __init__(self, rank, argv, env):
        self.rank = rank
        self.lines = []
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def find(self, pattern):
        return [m for m in (re.search(pattern, l) for l in self.lines) if m]

    def tail(self, k=12):
        return "\n    ".join(self.lines[-k:])


def chorus_shm():
    try:
        return {f for f in os.listdir("/dev/shm") if f.startswith("chorus")}
    except FileNotFoundError:
        return set()


def run(prefixes, worker, addr, mode, victims, timeout_s, extra_env=None, limit=None,
        on_line=None):
    """prefixes[r]: the argv prefix that runs a command on rank r's host ([] locally).
    on_line(ranks) is polled while the job runs (the cut-link case acts from it).
    Returns the ranks once every process has exited (or raises Failure)."""
    n = len(prefixes)
    if limit is None:
        limit = 60 + victims * (3 * timeout_s + 10)
    ranks = []
    try:
        for r in range(n):
            env = dict(os.environ)
            env.update(extra_env or {})
            env.update(CHORUS_RANK=str(r), CHORUS_WORLD_SIZE=str(n), CHORUS_INIT="tcp://" + addr,
                       CHORUS_TIMEOUT_S=str(timeout_s))
            env.pop("CHORUS_INIT_SERVED", None)
            argv = prefixes[r] + [worker, "--mode", mode, "--victims", str(victims)]
            ranks.append(Rank(r, argv, env))
        t0 = time.time()
        while any(k.proc.poll() is None for k in ranks):
            if on_line:
                on_line(ranks)
            if time.time() - t0 > limit:
                hung = [k.rank for k in ranks if k.proc.poll() is None]
                raise Failure("ranks %s still running after %d s:\n%s" % (
                    hung, limit, "\n".join("  rank %d:\n    %s" % (k.rank, k.tail())
                                           for k in ranks)))
            time.sleep(0.05)
        for k in ranks:
            k.reader.join(timeout=5)
        return ranks
    finally:
        for k in ranks:
            if k.proc.poll() is None:
                k.proc.kill()
                k.proc.wait()


def check_kill(ranks, victims, timeout_s, cut=False):
    n = len(ranks)
    dead = list(range(n - 1, n - 1 - victims, -1))  # old ranks, in the order they die
    for v in dead:
        k = ranks[v]
        if not cut and k.proc.returncode != -signal.SIGKILL:
            raise Failure("victim rank %d: exit status %s, want death by SIGKILL:\n    %s"
                          % (v, k.proc.returncode, k.tail()))
    survivors = [k for k in ranks if k.rank not in dead]
    for k in survivors:
        if k.proc.returncode != 0:
            raise Failure("survivor rank %d: exit status %d, want 0:\n    %s"
                          % (k.rank, k.proc.returncode, k.tail()))
    report = []
    for step, v in enumerate(dead):
        if cut:
            kill_at = float(ranks[v].find(r"CUT-AT ([0-9.]+)")[0].group(1))
        else:
            kill_at = float(ranks[v].find(r"KILL ([0-9.]+)")[0].group(1))
        # Ranks alive during this step: the survivors and the victims still to die.
        alive = [k for k in ranks if k.rank not in dead[:step + 1]]
        lists = set()
        for k in alive:
            det = k.find(r"DETECT (.*?) at ([0-9.]+),")
            if len(det) <= step:
                raise Failure("rank %d: no DETECT line for victim %d:\n    %s"
                              % (k.rank, v, k.tail()))
            took = float(det[step].group(2)) - kill_at
            if took > timeout_s + 5:
                raise Failure("rank %d saw victim %d's loss %.1f s after it, bound %d s"
                              % (k.rank, v, took, timeout_s + 5))
            fl = k.find(r"FAILED (\{[0-9,]*\}) agree_s=([0-9.]+)")[step]
            sh = k.find(r"SHRUNK n=(\d+) rank=(\d+) shrink_s=([0-9.]+)")[step]
            ck = k.find(r"CHECKS OK n=(\d+)")
            if len(ck) <= step or int(ck[step].group(1)) != n - step - 1:
                raise Failure("rank %d: no checked collectives on %d ranks:\n    %s"
                              % (k.rank, n - step - 1, k.tail()))
            if len(k.find(r"REVOKED next call chorusAborted")) <= step:
                raise Failure("rank %d: no prompt chorusAborted after chorusCommRevoke:\n    %s"
                              % (k.rank, k.tail()))
            lists.add(fl.group(1))
            report.append("victim %d: rank %d detected after %.2f s (%s), failed %s agreed in "
                          "%s s, shrink to %s ranks in %s s" % (
                              v, k.rank, took, det[step].group(1), fl.group(1), fl.group(2),
                              sh.group(1), sh.group(3)))
        want = "{%d}" % (n - 1 - step)  # the victim's rank in the communicator of this step
        if lists != {want}:
            raise Failure("failed-ranks lists differ or are wrong: %s, want %s on every survivor"
                          % (sorted(lists), want))
    for k in survivors:
        if not k.find(r"DONE"):
            raise Failure("rank %d: no DONE:\n    %s" % (k.rank, k.tail()))
    return report


def check_healthy(ranks):
    n = len(ranks)
    report = []
    for k in ranks:
        if k.proc.returncode != 0 or not k.find("DONE"):
            raise Failure("rank %d: exit status %d:\n    %s" % (k.rank, k.proc.returncode, k.tail()))
        if k.rank == n - 1:
            continue
        sh = k.find(r"SHRUNK n=(\d+) shrink_s=([0-9.]+) \(non-blocking\)")
        if not sh or not k.find(r"CHECKS OK n=%d" % (n - 1)):
            raise Failure("rank %d: no shrink or checks:\n    %s" % (k.rank, k.tail()))
        report.append("rank %d: shrink to %s ranks in %s s; checks ok" % (
            k.rank, sh[0].group(1), sh[0].group(2)))
    return report


def check_bad(ranks):
    n = len(ranks)
    cases = ["out-of-range", "negative", "duplicate", "self", "count", "flags"]
    report = []
    for k in ranks:
        if k.proc.returncode != 0 or not k.find("DONE"):
            raise Failure("rank %d: exit status %d:\n    %s" % (k.rank, k.proc.returncode, k.tail()))
        want = cases + ([] if k.rank == n - 1 else ["one-out-of-range", "differ"])
        for c in want:
            m = k.find(r"BAD %s ok ([0-9.]+) s: (.*)" % re.escape(c))
            if not m:
                raise Failure("rank %d: case %s not reported:\n    %s" % (k.rank, c, k.tail()))
            report.append("rank %d %s: %s s: %s" % (k.rank, c, m[0].group(1), m[0].group(2)))
        if k.rank != n - 1 and not k.find(r"CHECKS OK n=%d" % (n - 1)):
            raise Failure("rank %d: the good shrink after the bad ones did not check out:\n    %s"
                          % (k.rank, k.tail()))
    # The errors must name the culprit: the rank with the bad list, the differing lists.
    for k in ranks[:n - 1]:
        one = k.find(r"BAD one-out-of-range ok [0-9.]+ s: (.*)")[0].group(1)
        if "rank 1" not in one or "99" not in one:
            raise Failure("rank %d: one-out-of-range error does not name rank 1's 99: %s"
                          % (k.rank, one))
        differ = k.find(r"BAD differ ok [0-9.]+ s: (.*)")[0].group(1)
        if "same exclude list" not in differ:
            raise Failure("rank %d: differ error does not say the lists differ: %s"
                          % (k.rank, differ))
    return report


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--mode", required=True, choices=["kill", "healthy", "bad"])
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--victims", type=int, default=1)
    ap.add_argument("--timeout-s", type=int, default=3)
    a = ap.parse_args()
    before = chorus_shm()
    addr = "127.0.0.1:%d" % free_port()
    try:
        ranks = run([[]] * a.np, os.path.abspath(a.worker), addr, a.mode, a.victims, a.timeout_s)
        if a.mode == "kill":
            report = check_kill(ranks, a.victims, a.timeout_s)
        elif a.mode == "healthy":
            report = check_healthy(ranks)
        else:
            report = check_bad(ranks)
        for l in report:
            log(l)
        time.sleep(0.2)
        pids = tuple("-p%d" % k.proc.pid for k in ranks)  # our segments end in -p<pid>
        left = {f for f in chorus_shm() - before if f.endswith(pids)}
        if left:
            raise Failure("left in /dev/shm: %s" % sorted(left))
        log("nothing new in /dev/shm; PASS")
    except Failure as e:
        log("FAIL: %s" % e)
        sys.exit(1)


if __name__ == "__main__":
    main()
