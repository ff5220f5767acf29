#!/usr/bin/env python3
"""SIGKILL one of N ranks in the middle of a 64 MiB all-reduce loop; the others must fail.

Usage: kill_rank.py --worker PATH [--np 4] [--victim 2] [--timeout-s 20] [--bytes B]
                    [--registered] [--coll gather|scatter|broadcast] [--sleep-ms M]

--registered: the ranks all-gather between chorusMemAlloc buffers registered on the
communicator (the single-copy path, peers mapping each other's buffers) instead.
--coll gather | scatter | broadcast: the ranks gather or scatter B bytes to rank 0, or
broadcast B bytes from it, instead (small gathers and scatters
on the LL path); --sleep-ms M: every rank pauses M ms after each call (a small call would
otherwise finish the worker's loop before the kill).

No launcher is involved (chorusrun would kill the whole job as soon as one rank dies by a
signal, hiding what the library does): this script starts every rank itself with
CHORUS_RANK / CHORUS_WORLD_SIZE / CHORUS_INIT=tcp://127.0.0.1:PORT, waits until each has
completed at least one checked all-reduce, SIGKILLs the victim (and reaps it at once), and
then requires of every survivor that
  * it returns an error from its all-reduce (the worker prints "ERROR ..." and exits 3),
  * within CHORUS_TIMEOUT_S + 5 s of the kill (no process hangs: anything still alive
    then is killed and the test fails),
and finally that /dev/shm holds nothing of the job (no segment named after any rank's pid).

multinode.py reuses run_kill() with a per-rank command prefix (tools/cluster exec ...) to
run the same check across namespaced hosts over tcp.
"""
import argparse
import os
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
    print("kill_rank: " + msg, flush=True)


class Rank:
    def __init__(self, rank, argv, env, cwd):
        self.rank = rank
        self.lines = []
        self.iters = 0
        self.exit_time = None
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.err_lines = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.err_lines),
                         daemon=True).start()

    def _read(self, stream, into):
        for line in stream:
            into.append(line.rstrip("\n"))
            if " ok" in line and "iter" in line:
                self.iters += 1

    def error_line(self):
        for l in self.lines:
            if ": ERROR " in l:
                return l
        return None

    def tail(self):
        return "\n    ".join((self.lines + self.err_lines)[-8:])


def run_kill(prefixes, worker, addr, victim, timeout_s, bytes_, cwd=None, extra_env=None,
             start_limit=180, worker_args=()):
    """prefixes[r]: the argv prefix that runs a command on rank r's host ([] locally).
    Returns (seconds from the kill to the last survivor's exit, the survivors' lines)."""
    n = len(prefixes)
    ranks = []
    try:
        for r in range(n):
            env = dict(os.environ)
            env.update(extra_env or {})
            env.update(CHORUS_RANK=str(r), CHORUS_WORLD_SIZE=str(n), CHORUS_INIT="tcp://" + addr,
                       CHORUS_TIMEOUT_S=str(timeout_s))
            env.pop("CHORUS_INIT_SERVED", None)
            ranks.append(Rank(r, prefixes[r] + [worker, "--bytes", str(bytes_)] + list(worker_args),
                              env, cwd))
        # Into the loop: every rank has finished at least one checked all-reduce.
        t0 = time.time()
        while min(k.iters for k in ranks) < 1:
            for k in ranks:
                if k.proc.poll() is not None:
                    raise Failure("rank %d exited (%d) before the kill:\n    %s"
                                  % (k.rank, k.proc.returncode, k.tail()))
            if time.time() - t0 > start_limit:
                raise Failure("ranks did not get through one all-reduce in %d s: iterations %s"
                              % (start_limit, [k.iters for k in ranks]))
            time.sleep(0.05)
        time.sleep(0.3)  # into the middle of the next all-reduce
        log("all %d ranks in the loop (iterations %s); SIGKILL rank %d (pid %d)"
            % (n, [k.iters for k in ranks], victim, ranks[victim].proc.pid))
        killed = time.time()
        ranks[victim].proc.send_signal(signal.SIGKILL)
        ranks[victim].proc.wait()
        bound = timeout_s + 5
        survivors = [k for k in ranks if k.rank != victim]
        while time.time() - killed < bound and any(k.proc.poll() is None for k in survivors):
            for k in survivors:
                if k.exit_time is None and k.proc.poll() is not None:
                    k.exit_time = time.time()
            time.sleep(0.05)
        for k in survivors:
            if k.exit_time is None and k.proc.poll() is not None:
                k.exit_time = time.time()
        hung = [k.rank for k in survivors if k.proc.poll() is None]
        if hung:
            raise Failure("ranks %s still running %.0f s after the kill (CHORUS_TIMEOUT_S=%d + 5)"
                          % (hung, bound, timeout_s))
        time.sleep(0.2)  # the readers catch the last lines
        lines = []
        for k in survivors:
            line = k.error_line()
            if k.proc.returncode != 3 or line is None:
                raise Failure("rank %d: exit status %d, want 3 (an error returned):\n    %s"
                              % (k.rank, k.proc.returncode, k.tail()))
            lines.append("%s [exited %.1f s after the kill]" % (line, k.exit_time - killed))
        took = max(k.exit_time for k in survivors) - killed
        return took, lines, [k.proc.pid for k in ranks]
    finally:
        for k in ranks:
            if k.proc.poll() is None:
                k.proc.kill()
                k.proc.wait()


def shm_leftovers(pids, names):
    """Entries of /dev/shm (names) made by any of pids (our segments end in -p<pid>)."""
    suffixes = tuple("-p%d" % p for p in pids)
    return [f for f in names if f.startswith("chorus-") and f.endswith(suffixes)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--victim", type=int, default=2)
    ap.add_argument("--timeout-s", type=int, default=20)
    ap.add_argument("--bytes", type=int, default=64 << 20)
    ap.add_argument("--registered", action="store_true")
    ap.add_argument("--coll", choices=["gather", "scatter", "broadcast"])
    ap.add_argument("--sleep-ms", type=int, default=0)
    a = ap.parse_args()
    worker_args = ["--registered", "1"] if a.registered else []
    if a.coll:
        worker_args += ["--coll", a.coll]
    if a.sleep_ms:
        worker_args += ["--sleep-ms", str(a.sleep_ms)]
    addr = "127.0.0.1:%d" % free_port()
    try:
        took, lines, pids = run_kill([[]] * a.np, os.path.abspath(a.worker), addr, a.victim,
                                     a.timeout_s, a.bytes,
                                     worker_args=worker_args)
        for l in lines:
            log(l)
        log("every survivor returned an error; the last exited %.1f s after the kill "
            "(bound %d s)" % (took, a.timeout_s + 5))
        left = shm_leftovers(pids, os.listdir("/dev/shm"))
        if left:
            raise Failure("left in /dev/shm: %s" % left)
        log("nothing of the job left in /dev/shm; PASS")
    except Failure as e:
        log("FAIL: %s" % e)
        sys.exit(1)


if __name__ == "__main__":
    main()
