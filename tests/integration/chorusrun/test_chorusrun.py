#!/usr/bin/python3
"""Integration tests for tools/chorusrun (the launcher).

Usage: test_chorusrun.py /path/to/chorusrun [unittest args...]

ChorusrunTest covers local jobs (-np N, no hosts). MultiHostTest covers jobs
with hosts (-H / --hostfile): remote hosts are played by a fake launch agent,
a test double for ssh written by the test (see FAKE_AGENT), so remote
launching is exercised on one machine without namespaces. With
CHORUSRUN_PROBE set (meson does) to the rendezvous_probe program, real Chorus
ranks also rendezvous through the bootstrap root that chorusrun serves.

The same file doubles as a rank program (`test_chorusrun.py --rank MODE ...`)
for the cases a shell one-liner cannot express well (fast interleaved output,
a real rendezvous on CHORUS_INIT). Standard library only.
"""

import json
import os
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

CHORUSRUN = None  # set from argv in main()
THIS = os.path.abspath(__file__)
PY = sys.executable or "/usr/bin/python3"

# ---------------------------------------------------------------------------
# Rank-side helpers (run under chorusrun).
# ---------------------------------------------------------------------------


def pad_len(rank, i):
    """Length of the padding on line i of a rank: mostly short, some lines far
    longer than PIPE_BUF so that they need several reads and writes."""
    if i % 97 == 0:
        return 9000 + rank * 13
    return (i * 7 + rank * 3) % 150


def spam_line(rank, stream, i):
    return "rank %d %s %d %s" % (rank, stream, i, "x" * pad_len(rank, i))


def rank_spam(n):
    """Write n lines to stdout and n to stderr as fast as possible, cutting the
    byte stream at arbitrary places (mid-line) to stress the line reassembly."""
    rank = int(os.environ["CHORUS_RANK"])
    bufs = {1: [], 2: []}
    for i in range(n):
        for stream, fd in (("out", 1), ("err", 2)):
            bufs[fd].append(spam_line(rank, stream, i) + "\n")
        if i % 50 == 49 or i == n - 1:
            for fd in (1, 2):
                data = "".join(bufs[fd]).encode()
                bufs[fd] = []
                # Cut into uneven pieces that rarely coincide with line ends.
                step = 1000 + 37 * rank
                for off in range(0, len(data), step):
                    piece = data[off:off + step]
                    while piece:
                        w = os.write(fd, piece)
                        piece = piece[w:]
    os.write(1, b"no newline at the end")
    return 0


def rank_rendezvous():
    """Rank 0 listens on CHORUS_INIT; every other rank connects and presents
    its rank and CHORUS_SECRET. Rank 0 checks them all and prints 'ok'."""
    rank = int(os.environ["CHORUS_RANK"])
    world = int(os.environ["CHORUS_WORLD_SIZE"])
    secret = os.environ["CHORUS_SECRET"]
    m = re.fullmatch(r"tcp://([0-9.]+):(\d+)", os.environ["CHORUS_INIT"])
    host, port = m.group(1), int(m.group(2))
    if rank == 0:
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.bind((host, port))  # must succeed: the launcher picked a free port
        srv.listen(world)
        srv.settimeout(20)
        seen = set()
        while len(seen) < world - 1:
            conn, _ = srv.accept()
            with conn:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = conn.recv(100)
                    if not chunk:
                        break
                    data += chunk
                r, s = data.decode().split()
                if s != secret:
                    print("bad secret from rank", r)
                    return 1
                seen.add(int(r))
        if seen != set(range(1, world)):
            print("wrong ranks", sorted(seen))
            return 1
        print("ok %d" % world)
        return 0
    deadline = time.monotonic() + 20
    while True:
        try:
            c = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    with c:
        c.sendall(("%d %s\n" % (rank, secret)).encode())
    return 0


def rank_report(args):
    """Print one JSON line: this rank's arguments, environment and directory."""
    sys.stdout.write(json.dumps({"argv": args, "env": dict(os.environ), "cwd": os.getcwd()}) + "\n")
    sys.stdout.flush()
    return 0


def rank_main(argv):
    mode = argv[0]
    if mode == "spam":
        return rank_spam(int(argv[1]))
    if mode == "report":
        return rank_report(argv[1:])
    if mode == "rendezvous":
        return rank_rendezvous()
    raise SystemExit("unknown rank mode %r" % mode)


# ---------------------------------------------------------------------------
# Test-side helpers.
# ---------------------------------------------------------------------------


def run(args, timeout=20, env=None, input=None):
    """Run chorusrun to completion; returns (rc, stdout, stderr, seconds)."""
    t0 = time.monotonic()
    p = subprocess.run([CHORUSRUN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, env=env, input=input)
    return p.returncode, p.stdout.decode(), p.stderr.decode(), time.monotonic() - t0


def finish(p, timeout=30):
    """communicate() with a deadline; a launcher that hangs is killed and fails the test."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError("chorusrun did not exit within %d s" % timeout)


def read_until(pipe, text, timeout=30):
    """Reads pipe (raw, so that a later communicate() misses nothing) until text has come;
    returns everything read. Fails if the pipe closes or the time runs out first."""
    deadline = time.monotonic() + timeout
    got = b""
    while text not in got:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([pipe], [], [], left)[0]:
            raise AssertionError("no %r within %d s; read %r" % (text, timeout, got))
        chunk = os.read(pipe.fileno(), 4096)
        if not chunk:
            raise AssertionError("pipe closed before %r; read %r" % (text, got))
        got += chunk
    return got


def ours_alive(pid, tag):
    """True if pid is a live (not zombie) process carrying our tag in its environment."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        state = st[st.rindex(")") + 2]
        if state in "ZXx":
            return False
        with open("/proc/%d/environ" % pid, "rb") as f:
            return ("CHORUSRUN_TEST_TAG=" + tag).encode() in f.read().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return False


def read_pids(d, names, timeout=15):
    """Wait until every pid file in d exists and holds a full line; return {name: pid}."""
    deadline = time.monotonic() + timeout
    pids = {}
    while time.monotonic() < deadline:
        for n in names:
            if n in pids:
                continue
            try:
                with open(os.path.join(d, n)) as f:
                    txt = f.read()
            except FileNotFoundError:
                continue
            if txt.endswith("\n"):
                pids[n] = int(txt)
        if len(pids) == len(names):
            return pids
        time.sleep(0.02)
    raise AssertionError("pid files missing: %s" % sorted(set(names) - set(pids)))


# A rank that records its own pid (p.R) and a grandchild's (g.R), then sleeps.
# The grandchild does not hold chorusrun's output pipes, so a launcher that
# fails to kill it makes the test fail on the pid check, not hang on a pipe.
SLEEPER = ('sleep 60 >/dev/null 2>&1 & echo $! > "$D/g.$CHORUS_RANK"; '
           'echo $$ > "$D/p.$CHORUS_RANK"; wait')


class LauncherTestBase(unittest.TestCase):
    """A temporary directory for pid files and a tag that marks our processes."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="chorusrun-test-")
        self.tag = uuid.uuid4().hex

    def tearDown(self):
        # Leave nothing behind, even when a test failed because ranks survived.
        for n in os.listdir(self.dir):
            if n[:2] in ("p.", "g."):
                try:
                    pid = int(open(os.path.join(self.dir, n)).read())
                except ValueError:
                    continue
                if ours_alive(pid, self.tag):
                    os.kill(pid, signal.SIGKILL)
        for n in os.listdir(self.dir):
            p = os.path.join(self.dir, n)
            if os.path.isdir(p):
                for m in os.listdir(p):
                    os.unlink(os.path.join(p, m))
                os.rmdir(p)
            else:
                os.unlink(p)
        os.rmdir(self.dir)

    def sleeper_args(self, np, script=SLEEPER, extra=()):
        return (["-np", str(np), "-x", "CHORUSRUN_TEST_TAG=" + self.tag, "-x", "D=" + self.dir]
                + list(extra) + ["sh", "-c", script])

    def assert_all_dead(self, pids, within=5.0):
        deadline = time.monotonic() + within
        while True:
            alive = {n: p for n, p in pids.items() if ours_alive(p, self.tag)}
            if not alive:
                return
            if time.monotonic() > deadline:
                self.fail("rank processes survived: %s" % alive)
            time.sleep(0.05)


class ChorusrunTest(LauncherTestBase):
    """Local jobs: -np N without hosts."""

    # --- environment contract ---------------------------------------------

    def check_env(self, np):
        rc, out, err, _ = run(["-np", str(np), "sh", "-c",
                               'echo "$CHORUS_RANK $CHORUS_WORLD_SIZE $CHORUS_LOCAL_RANK '
                               '$CHORUS_LOCAL_SIZE $CHORUS_INIT $CHORUS_SECRET"'])
        self.assertEqual(rc, 0, err)
        self.assertEqual(err, "")
        lines = out.splitlines()
        self.assertEqual(len(lines), np, out)
        fields = sorted((l.split() for l in lines), key=lambda f: int(f[0]))
        inits = {f[4] for f in fields}
        secrets = {f[5] for f in fields}
        self.assertEqual(len(inits), 1, "ranks disagree on CHORUS_INIT: %s" % inits)
        self.assertEqual(len(secrets), 1, "ranks disagree on CHORUS_SECRET: %s" % secrets)
        init, secret = inits.pop(), secrets.pop()
        m = re.fullmatch(r"tcp://127\.0\.0\.1:(\d+)", init)
        self.assertIsNotNone(m, init)
        self.assertTrue(1 <= int(m.group(1)) <= 65535, init)
        self.assertRegex(secret, r"^[0-9a-f]{32}$")
        expected = [[str(r), str(np), str(r), str(np), init, secret] for r in range(np)]
        self.assertEqual(fields, expected)
        return init, secret

    def test_env_np1(self):
        self.check_env(1)

    def test_env_np3(self):
        self.check_env(3)

    def test_env_np8(self):
        self.check_env(8)

    def test_secret_fresh_per_job(self):
        _, s1 = self.check_env(2)
        _, s2 = self.check_env(2)
        self.assertNotEqual(s1, s2)

    def test_inherited_rank_vars_are_overridden(self):
        env = dict(os.environ, CHORUS_RANK="77", CHORUS_WORLD_SIZE="99", CHORUS_SECRET="stale")
        rc, out, err, _ = run(["-np", "2", "sh", "-c", 'echo "$CHORUS_RANK/$CHORUS_WORLD_SIZE/$CHORUS_SECRET"'],
                              env=env)
        self.assertEqual(rc, 0, err)
        got = sorted(out.splitlines())
        self.assertEqual([g.rsplit("/", 1)[0] for g in got], ["0/2", "1/2"])
        for g in got:
            self.assertRegex(g.rsplit("/", 1)[1], r"^[0-9a-f]{32}$")

    def test_rendezvous_port_is_usable(self):
        rc, out, err, _ = run(["-np", "4", PY, THIS, "--rank", "rendezvous"], timeout=40)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "ok 4\n")

    def test_x_set_and_forward(self):
        env = dict(os.environ, CHORUSRUN_FWD="forwarded value")
        rc, out, err, _ = run(["-np", "2", "-x", "CHORUSRUN_SET=a=b c", "-x", "CHORUSRUN_FWD",
                               "-x", "CHORUSRUN_TWICE=1", "-x", "CHORUSRUN_TWICE=2",
                               "sh", "-c", 'echo "$CHORUS_RANK|$CHORUSRUN_SET|$CHORUSRUN_FWD|$CHORUSRUN_TWICE"'],
                              env=env)
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()),
                         ["0|a=b c|forwarded value|2", "1|a=b c|forwarded value|2"])

    def test_x_overrides_rendezvous(self):
        rc, out, err, _ = run(["-np", "2", "-x", "CHORUS_INIT=file:///tmp/x", "-x", "CHORUS_SECRET=" + "ab" * 16,
                               "sh", "-c", 'echo "$CHORUS_INIT $CHORUS_SECRET"'])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.splitlines(), ["file:///tmp/x " + "ab" * 16] * 2)

    # --- output --------------------------------------------------------------

    def test_passthrough_untouched(self):
        rc, out, err, _ = run(["-np", "2", "sh", "-c", 'printf "plain %s\\n" $CHORUS_RANK; echo e >&2'])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()), ["plain 0", "plain 1"])
        self.assertEqual(err, "e\ne\n")

    def test_tag_output_lines_intact(self):
        np, n = 4, 2000
        rc, out, err, _ = run(["-np", str(np), "--tag-output", PY, THIS, "--rank", "spam", str(n)],
                              timeout=50)
        self.assertEqual(rc, 0, err[-2000:])
        for stream, text in (("out", out), ("err", err)):
            self.assertTrue(text.endswith("\n"))
            per_rank = {r: [] for r in range(np)}
            for line in text.split("\n")[:-1]:
                m = re.fullmatch(r"\[(\d+)\] (.*)", line, re.S)
                self.assertIsNotNone(m, "untagged %s line: %r" % (stream, line[:200]))
                per_rank[int(m.group(1))].append(m.group(2))
            for r in range(np):
                body = per_rank[r]
                expect = [spam_line(r, stream, i) for i in range(n)]
                if stream == "out":
                    expect.append("no newline at the end")
                self.assertEqual(len(body), len(expect), "rank %d %s line count" % (r, stream))
                for got, want in zip(body, expect):
                    if got != want:
                        self.fail("rank %d %s: got %r, want %r" % (r, stream, got[:120], want[:120]))

    def test_tag_output_separates_streams(self):
        rc, out, err, _ = run(["-np", "3", "--tag-output", "sh", "-c",
                               'echo "out $CHORUS_RANK"; echo "err $CHORUS_RANK" >&2; printf "partial"'])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()),
                         ["[0] out 0", "[0] partial", "[1] out 1", "[1] partial", "[2] out 2", "[2] partial"])
        self.assertEqual(sorted(err.splitlines()), ["[0] err 0", "[1] err 1", "[2] err 2"])

    def test_stdin_goes_to_rank0_only(self):
        rc, out, err, _ = run(["-np", "3", "sh", "-c", 'echo "$CHORUS_RANK:$(cat)"'], input=b"hello\n")
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()), ["0:hello", "1:", "2:"])

    # --- exit status and teardown ------------------------------------------

    def test_all_succeed_and_early_exit_is_not_failure(self):
        rc, out, err, _ = run(["-np", "3", "sh", "-c",
                               '[ $CHORUS_RANK = 0 ] && exit 0; sleep 0.5; echo "done $CHORUS_RANK"'])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()), ["done 1", "done 2"])
        self.assertEqual(err, "")

    def test_exit_code_propagates_and_others_are_killed(self):
        script = ('if [ $CHORUS_RANK = 2 ]; then echo $$ > "$D/p.2"; sleep 0.5; exit 3; fi; ' + SLEEPER)
        p = subprocess.Popen([CHORUSRUN] + self.sleeper_args(4, script),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        t0 = time.monotonic()
        pids = read_pids(self.dir, ["p.0", "g.0", "p.1", "g.1", "p.2", "p.3", "g.3"])
        out, err = finish(p)
        elapsed = time.monotonic() - t0
        self.assertEqual(p.returncode, 3, err)
        self.assertLess(elapsed, 10, "surviving ranks were not killed promptly (they sleep 60 s)")
        lines = err.decode().splitlines()
        self.assertIn("chorusrun: rank 2 (pid %d) exited with status 3" % pids["p.2"], lines)
        self.assertEqual(sum("exited with status" in l or "killed by signal" in l for l in lines), 1, lines)
        self.assert_all_dead(pids)

    def test_rank_killed_by_sigkill(self):
        script = 'if [ $CHORUS_RANK = 1 ]; then echo $$ > "$D/p.1"; sleep 0.3; kill -9 $$; fi; ' + SLEEPER
        rc, out, err, elapsed = run(self.sleeper_args(3, script))
        self.assertEqual(rc, 137, err)
        self.assertLess(elapsed, 10)
        with open(os.path.join(self.dir, "p.1")) as f:
            pid = int(f.read())
        self.assertIn("chorusrun: rank 1 (pid %d) killed by signal 9 (Killed)" % pid, err.splitlines())
        pids = read_pids(self.dir, ["p.0", "g.0", "p.2", "g.2"], timeout=1)
        self.assert_all_dead(pids)

    def test_max_status_when_simultaneous(self):
        # Every rank fails; whichever is seen first, the status is a rank's own.
        rc, out, err, _ = run(["-np", "3", "sh", "-c", "exit $((CHORUS_RANK + 4))"])
        self.assertIn(rc, (4, 5, 6), err)
        self.assertRegex(err, r"chorusrun: rank \d \(pid \d+\) exited with status %d" % rc)

    # --- --keep-going: a lost rank does not stop the others ------------------

    def keep_going(self, script, n=3):
        return run(["--keep-going", "-np", str(n), "sh", "-c", script], timeout=30)

    def test_keep_going_lost_rank_handled(self):
        # Rank 1 dies by SIGKILL; the others go on, finish and exit 0: the job exits 0.
        rc, out, err, _ = self.keep_going(
            '[ $CHORUS_RANK = 1 ] && kill -9 $$; sleep 0.5; echo "done $CHORUS_RANK"')
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()), ["done 0", "done 2"])
        self.assertRegex(err, r"chorusrun: rank 1 \(pid \d+\) killed by signal 9 \(Killed\)")
        # (rank 2 may not have been started yet when rank 1 dies)
        self.assertRegex(err, r"chorusrun: --keep-going: the other (2 ranks go|1 rank goes) on")
        self.assertIn("the lost ranks were handled, exit status 0", err)

    def test_keep_going_survivor_fails(self):
        # A survivor that exits non-zero later: the job has the first failure's status.
        rc, out, err, _ = self.keep_going(
            '[ $CHORUS_RANK = 1 ] && kill -9 $$; sleep 0.3; [ $CHORUS_RANK = 2 ] && exit 5; '
            'sleep 0.3; echo "done $CHORUS_RANK"')
        self.assertEqual(rc, 137, err)
        self.assertEqual(out.splitlines(), ["done 0"])
        self.assertRegex(err, r"rank 2 \(pid \d+\) exited with status 5")

    def test_keep_going_nonzero_exit_is_not_handled(self):
        # No signal: a rank's own non-zero exit is a failure no survivor handled.
        rc, out, err, _ = self.keep_going('[ $CHORUS_RANK = 1 ] && exit 4; sleep 0.3')
        self.assertEqual(rc, 4, err)

    def test_keep_going_all_lost(self):
        rc, out, err, _ = self.keep_going("kill -9 $$")
        self.assertEqual(rc, 137, err)

    def test_keep_going_timeout_still_applies(self):
        rc, out, err, elapsed = run(["--keep-going", "--timeout", "1", "-np", "2", "sh", "-c",
                                     "[ $CHORUS_RANK = 1 ] && kill -9 $$; sleep 60"], timeout=30)
        self.assertEqual(rc, 124, err)
        self.assertLess(elapsed, 10)

    def signal_test(self, sig, expect_rc):
        p = subprocess.Popen([CHORUSRUN] + self.sleeper_args(3), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        pids = read_pids(self.dir, ["%s.%d" % (k, r) for r in range(3) for k in "pg"])
        t0 = time.monotonic()
        p.send_signal(sig)
        out, err = finish(p)
        self.assertEqual(p.returncode, expect_rc, err)
        self.assertLess(time.monotonic() - t0, 5)
        self.assert_all_dead(pids)
        return err.decode()

    def test_sigint_kills_ranks(self):
        err = self.signal_test(signal.SIGINT, 130)
        self.assertIn("received SIGINT", err)

    def test_sigterm_kills_ranks(self):
        self.signal_test(signal.SIGTERM, 143)

    def test_sigkill_after_grace_when_sigterm_ignored(self):
        script = "trap '' TERM; " + SLEEPER + "; wait"
        p = subprocess.Popen([CHORUSRUN] + self.sleeper_args(2, script), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        pids = read_pids(self.dir, ["p.0", "g.0", "p.1", "g.1"])
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = finish(p)
        elapsed = time.monotonic() - t0
        self.assertEqual(p.returncode, 130, err)
        self.assertGreater(elapsed, 1.5, "SIGKILL came before the grace period")
        self.assertLess(elapsed, 10)
        self.assertIn("sending SIGKILL", err.decode())
        self.assert_all_dead(pids)

    def test_second_sigint_kills_at_once(self):
        # The second SIGINT goes once chorusrun has taken the first (its "received SIGINT"
        # line): chorusrun reads signals from a signalfd, and two SIGINTs that arrive before
        # it reads the first are one pending signal, so a second sent after a fixed pause
        # is no second one when a busy machine keeps chorusrun off the CPU that long.
        script = "trap '' TERM; " + SLEEPER + "; wait"
        p = subprocess.Popen([CHORUSRUN] + self.sleeper_args(2, script), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        pids = read_pids(self.dir, ["p.0", "g.0", "p.1", "g.1"])
        p.send_signal(signal.SIGINT)
        first = read_until(p.stderr, b"received SIGINT; terminating")
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = finish(p)
        err = (first + err).decode()
        self.assertEqual(p.returncode, 130, err)
        self.assertIn("received SIGINT again", err)
        self.assertLess(time.monotonic() - t0, 1.5)
        self.assert_all_dead(pids)

    def test_timeout(self):
        rc, out, err, elapsed = run(self.sleeper_args(3, extra=["--timeout", "1"]))
        self.assertEqual(rc, 124, err)
        self.assertGreaterEqual(elapsed, 0.95)
        self.assertLess(elapsed, 10)
        self.assertIn("--timeout", err)
        pids = read_pids(self.dir, ["%s.%d" % (k, r) for r in range(3) for k in "pg"], timeout=1)
        self.assert_all_dead(pids)

    def test_timeout_not_reached(self):
        rc, out, err, elapsed = run(["-np", "2", "--timeout", "30", "true"])
        self.assertEqual(rc, 0, err)
        self.assertLess(elapsed, 10)

    # --- launching ---------------------------------------------------------

    def test_command_not_found(self):
        rc, out, err, _ = run(["-np", "3", "chorusrun-no-such-command-" + self.tag])
        self.assertEqual(rc, 127)
        self.assertIn("cannot execute", err)

    def test_command_not_executable(self):
        path = os.path.join(self.dir, "not-exec")
        with open(path, "w") as f:
            f.write("#!/bin/sh\necho hi\n")
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
        rc, out, err, _ = run(["-np", "2", path])
        self.assertEqual(rc, 126, err)
        self.assertEqual(out, "")

    def test_wdir(self):
        sub = os.path.join(self.dir, "work")
        os.mkdir(sub)
        script = os.path.join(sub, "hello.sh")
        with open(script, "w") as f:
            f.write('#!/bin/sh\necho "$CHORUS_RANK $(pwd -P)"\n')
        os.chmod(script, 0o755)
        rc, out, err, _ = run(["-np", "2", "--wdir", sub, "./hello.sh"])
        self.assertEqual(rc, 0, err)
        real = os.path.realpath(sub)
        self.assertEqual(sorted(out.splitlines()), ["0 " + real, "1 " + real])
        rc, out, err, _ = run(["-np", "2", "--wdir=" + os.path.join(self.dir, "missing"), "true"])
        self.assertNotEqual(rc, 0)
        self.assertIn("cannot change to directory", err)

    def test_usage_errors(self):
        marker = os.path.join(self.dir, "started")
        cmd = ["sh", "-c", "touch " + marker]
        cases = [
            [],
            ["-np"],
            ["-np", "0"] + cmd,
            ["-np", "-1"] + cmd,
            ["-np", "abc"] + cmd,
            ["-np", "2"],
            cmd,  # -np missing
            ["--bogus", "-np", "2"] + cmd,
            ["-np", "2", "--no-such-option"] + cmd,
            ["-np", "2", "--timeout", "0"] + cmd,
            ["-np", "2", "--timeout", "soon"] + cmd,
            ["-np", "2", "-x"],
            ["-np", "2", "-x", "1BAD=x"] + cmd,
            ["-np", "2", "-x", "CHORUS_RANK=5"] + cmd,
            ["-np", "2", "-x", "CHORUS_SECRET=not-hex"] + cmd,
            ["-np", "2", "--tag-output=yes"] + cmd,
        ]
        for args in cases:
            rc, out, err, _ = run(args)
            self.assertEqual(rc, 2, "args %r: rc %d, stderr %r" % (args, rc, err))
            self.assertTrue(err.startswith("chorusrun: "), (args, err))
            self.assertIn("--help", err)
            self.assertEqual(out, "")
            self.assertFalse(os.path.exists(marker), "a rank was started for %r" % args)
        rc, out, err, _ = run(["--bogus", "-np", "2", "true"])
        self.assertIn("unknown option '--bogus'", err)

    def test_help_and_version(self):
        for flag in ("-h", "--help"):
            rc, out, err, _ = run([flag])
            self.assertEqual(rc, 0)
            self.assertTrue(out.startswith("Usage: chorusrun -np N"), out)
            self.assertIn("CHORUS_INIT", out)
        rc, out, err, _ = run(["--version"])
        self.assertEqual(rc, 0)
        self.assertRegex(out, r"^chorusrun \(Chorus\) \d+\.\d+\.\d+\n$")

    def test_double_dash_and_command_options(self):
        # Options after CMD belong to CMD, not to chorusrun.
        rc, out, err, _ = run(["-np", "1", "--", "sh", "-c", 'echo "$0 $1"', "--tag-output", "-np"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "--tag-output -np\n")


# ---------------------------------------------------------------------------
# Jobs with hosts.
# ---------------------------------------------------------------------------

# FAKE LAUNCH AGENT -- a test double for ssh, NOT a real remote launcher.
# chorusrun runs it exactly as it would run ssh:
#     fake_agent [agent options...] HOST 'shell command'
# It appends its argv (one JSON list per line) to $FAKE_AGENT_LOG and then runs
# the shell command with `sh -c` on "HOST" -- in truth on this machine -- in a
# scrubbed environment (only PATH, plus FAKE_HOST=HOST so a rank can tell where
# it "is"), like a fresh ssh login: whatever a rank needs must travel inside
# the command string. FAKE_AGENT_MODE=exec (default) execs sh, so the agent
# becomes the rank; FAKE_AGENT_MODE=fork stays the rank's parent, as ssh does,
# records its pid in $D/a.PID and exits with the rank's status. FAKE_AGENT_MISSING=PATH
# plays a host that has no file at PATH (the command names a path that does not exist).
FAKE_AGENT = r'''#!%(py)s
# Test double for ssh used by test_chorusrun.py (see FAKE_AGENT there).
import json, os, sys
args = sys.argv[1:]
fd = os.open(os.environ["FAKE_AGENT_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, (json.dumps(args) + "\n").encode())
os.close(fd)
host, cmd = args[-2], args[-1]
if os.environ.get("FAKE_AGENT_MISSING"):
    missing = os.environ["FAKE_AGENT_MISSING"]
    cmd = cmd.replace(missing, "/nonexistent-on-" + host + missing)
env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FAKE_HOST": host}
if os.environ.get("FAKE_AGENT_MODE") != "fork":
    os.execve("/bin/sh", ["sh", "-c", cmd], env)
with open(os.path.join(os.environ["D"], "a.%%d" %% os.getpid()), "w") as f:
    f.write("%%d\n" %% os.getpid())
pid = os.fork()
if pid == 0:
    os.execve("/bin/sh", ["sh", "-c", cmd], env)
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))
'''


class MultiHostTest(LauncherTestBase):
    """-H / --hostfile, rank mapping, remote launching through the fake agent."""

    def setUp(self):
        super().setUp()
        self.agent = os.path.join(self.dir, "fake_agent")
        with open(self.agent, "w") as f:
            f.write(FAKE_AGENT % {"py": PY})
        os.chmod(self.agent, 0o755)
        self.log = os.path.join(self.dir, "agent.log")
        self.env = dict(os.environ, FAKE_AGENT_LOG=self.log)
        self.env.pop("FAKE_AGENT_MODE", None)

    def tearDown(self):
        for n in os.listdir(self.dir):
            if n.startswith("a."):
                pid = int(n[2:])
                if ours_alive(pid, self.tag):
                    os.kill(pid, signal.SIGKILL)
        super().tearDown()

    def agent_args(self, extra_agent_words=""):
        agent = self.agent + ((" " + extra_agent_words) if extra_agent_words else "")
        return ["--launch-agent", agent, "--rendezvous-addr", "127.0.0.1"]

    def agent_calls(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(l) for l in f]

    def report(self, args, np_expected, cwd=None, env=None):
        """Run PY THIS --rank report under chorusrun; returns {rank: report}."""
        rc, out, err, _ = run_in(args + [PY, THIS, "--rank", "report"], cwd=cwd,
                                 env=env or self.env)
        self.assertEqual(rc, 0, err)
        reps = [json.loads(l) for l in out.splitlines()]
        self.assertEqual(len(reps), np_expected, out)
        by_rank = {int(r["env"]["CHORUS_RANK"]): r for r in reps}
        self.assertEqual(sorted(by_rank), list(range(np_expected)))
        return by_rank

    def check_layout(self, reps, layout):
        """layout: per rank (host or None for local, local_rank, local_size, node_rank)."""
        n = len(layout)
        inits = {r["env"]["CHORUS_INIT"] for r in reps.values()}
        secrets = {r["env"]["CHORUS_SECRET"] for r in reps.values()}
        self.assertEqual(len(inits), 1, inits)
        self.assertEqual(len(secrets), 1, secrets)
        self.assertRegex(inits.pop(), r"^tcp://127\.0\.0\.1:\d+$")
        self.assertRegex(secrets.pop(), r"^[0-9a-f]{32}$")
        for rank, (host, lr, ls, node) in enumerate(layout):
            e = reps[rank]["env"]
            got = (e.get("FAKE_HOST"), e["CHORUS_LOCAL_RANK"], e["CHORUS_LOCAL_SIZE"],
                   e["CHORUS_NODE_RANK"], e["CHORUS_WORLD_SIZE"], e.get("CHORUS_INIT_SERVED"))
            self.assertEqual(got, (host, str(lr), str(ls), str(node), str(n), "1"),
                             "rank %d" % rank)

    # --- host lists and mapping ------------------------------------------------

    def test_H_mapping_by_slot(self):
        reps = self.report(["-H", "localhost:2,fakehostA:2,fakehostB"] + self.agent_args(), 5)
        self.check_layout(reps, [(None, 0, 2, 0), (None, 1, 2, 0), ("fakehostA", 0, 2, 1),
                                 ("fakehostA", 1, 2, 1), ("fakehostB", 0, 1, 2)])
        calls = self.agent_calls()
        self.assertEqual(sorted(c[0] for c in calls), ["fakehostA", "fakehostA", "fakehostB"])
        for c in calls:
            self.assertEqual(len(c), 2, c)  # HOST 'command': one word each

    def test_H_repeats_count_as_slots(self):
        reps = self.report(["-H", "fakehostA,fakehostA,fakehostB"] + self.agent_args(), 3)
        self.check_layout(reps, [("fakehostA", 0, 2, 0), ("fakehostA", 1, 2, 0),
                                 ("fakehostB", 0, 1, 1)])

    def test_np_below_slots_and_several_H(self):
        reps = self.report(["-np", "3", "-H", "fakehostA:2", "-H", "fakehostB:4"]
                           + self.agent_args(), 3)
        self.check_layout(reps, [("fakehostA", 0, 2, 0), ("fakehostA", 1, 2, 0),
                                 ("fakehostB", 0, 1, 1)])

    def test_hostfile(self):
        hf = os.path.join(self.dir, "hosts")
        with open(hf, "w") as f:
            f.write("# a comment line\n\n"
                    "fakehostA slots=2   # trailing comment\n"
                    "   \n"
                    "fakehostB slots = 1 max_slots=8\n"
                    "fakehostA\n")
        reps = self.report(["--hostfile", hf] + self.agent_args(), 4)
        self.check_layout(reps, [("fakehostA", 0, 3, 0), ("fakehostA", 1, 3, 0),
                                 ("fakehostA", 2, 3, 0), ("fakehostB", 0, 1, 1)])

    def test_oversubscribe_wraps_round_robin(self):
        args = ["-np", "7", "-H", "fakehostA:2,fakehostB"] + self.agent_args()
        rc, out, err, _ = run_in(args + ["true"], env=self.env)
        self.assertEqual(rc, 2, err)
        self.assertIn("-np 7 exceeds the 3 slots", err)
        self.assertIn("--oversubscribe", err)
        self.assertEqual(self.agent_calls(), [])
        reps = self.report(["--oversubscribe"] + args, 7)
        # Slots A A B, repeated: ranks 0 1 | 2 | 3 4 | 5 | 6 -> A A B A A B A.
        a, b = "fakehostA", "fakehostB"
        self.check_layout(reps, [(a, 0, 5, 0), (a, 1, 5, 0), (b, 0, 2, 1), (a, 2, 5, 0),
                                 (a, 3, 5, 0), (b, 1, 2, 1), (a, 4, 5, 0)])

    def test_local_names_merge_and_stay_local(self):
        me = socket.gethostname()
        rc, out, err, _ = run_in(["-H", "localhost," + me + ":2,127.0.0.1", "--tag-output"]
                                 + self.agent_args() + ["sh", "-c",
                                 'echo "$CHORUS_LOCAL_RANK/$CHORUS_LOCAL_SIZE $CHORUS_NODE_RANK '
                                 '$CHORUS_INIT_SERVED ${FAKE_HOST:-here}"'], env=self.env)
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()),
                         ["[%d] %d/4 0 1 here" % (r, r) for r in range(4)])
        self.assertEqual(self.agent_calls(), [])

    def test_host_usage_errors(self):
        marker = os.path.join(self.dir, "started")
        cmd = ["sh", "-c", "touch " + marker]
        hf_bad = os.path.join(self.dir, "bad-hosts")
        with open(hf_bad, "w") as f:
            f.write("fakehostA slots=2\nfakehostB cores=3\n")
        hf_empty = os.path.join(self.dir, "empty-hosts")
        with open(hf_empty, "w") as f:
            f.write("# nothing\n\n")
        agent = ["--launch-agent", self.agent, "--rendezvous-addr", "127.0.0.1"]
        cases = [
            (["-H", ""] + cmd, "empty host list"),
            (["-H", "a:0"] + cmd, "invalid slot count"),
            (["-H", "a:x"] + cmd, "invalid slot count"),
            (["-H", "a,,b"] + cmd, "empty host name"),
            (["-H", "-oProxyCommand=x"] + cmd, "starts with '-'"),
            (["-H", "fe80::1:2"] + cmd, "[address]"),
            (["-H", "a", "--hostfile", hf_empty] + cmd, "hostfile"),
            (["--hostfile", hf_empty] + cmd, "names no hosts"),
            (["--hostfile", hf_bad] + cmd, "bad-hosts:2: unknown field 'cores=3'"),
            (["--hostfile", os.path.join(self.dir, "missing")] + cmd, "cannot read hostfile"),
            (["-H", "a,b", "--hostfile", hf_bad] + cmd, "not both"),
            (["-np", "3", "-H", "fakehostA:2"] + agent + cmd, "exceeds the 2 slots"),
            (["-H", "fakehostA", "--launch-agent", "  "] + cmd, "--launch-agent"),
            (["-H", "fakehostA"] + agent + ["A=1", "true"], "contain '='"),
            (["-H"], "-H"),
        ]
        for args, msg in cases:
            rc, out, err, _ = run_in(args, env=self.env)
            self.assertEqual(rc, 2, "args %r: rc %d, stderr %r" % (args, rc, err))
            self.assertTrue(err.startswith("chorusrun: "), (args, err))
            self.assertIn(msg, err, args)
            self.assertEqual(out, "")
            self.assertFalse(os.path.exists(marker), "a rank was started for %r" % args)
        self.assertEqual(self.agent_calls(), [])

    # --- the remote command line -------------------------------------------

    def test_quoting_of_arguments_and_x_values(self):
        odd = ["plain", "two words", "it's", 'say "hi"', "$HOME `id` $(id) \\n", "*", "",
               "new\nline", "tab\there", "semi;colon && echo pwned", "-dash", "a=b", "ü ñ"]
        xval = "spaces and 'single' \"double\" $dollar `tick` \\back ;|&<>"
        env = dict(self.env, CHORUSRUN_FWD="fwd 'value'", CHORUS_FAKE_TUNABLE="inherited",
                   CHORUSRUN_NOT_FORWARDED="local only")
        args = (["-H", "fakehostA:2", "-x", "CHORUSRUN_SET=" + xval, "-x", "CHORUSRUN_FWD",
                 "-x", "CHORUSRUN_EMPTY="] + self.agent_args("-o BatchMode=yes"))
        rc, out, err, _ = run_in(args + [PY, THIS, "--rank", "report"] + odd, env=env)
        self.assertEqual(rc, 0, err)
        reps = [json.loads(l) for l in out.splitlines()]
        self.assertEqual(len(reps), 2)
        for r in reps:
            self.assertEqual(r["argv"], odd)
            e = r["env"]
            self.assertEqual(e["CHORUSRUN_SET"], xval)
            self.assertEqual(e["CHORUSRUN_FWD"], "fwd 'value'")
            self.assertEqual(e["CHORUSRUN_EMPTY"], "")
            self.assertEqual(e["CHORUS_FAKE_TUNABLE"], "inherited")  # CHORUS_* travel
            self.assertNotIn("CHORUSRUN_NOT_FORWARDED", e)           # the rest does not
            self.assertEqual(e["FAKE_HOST"], "fakehostA")
        calls = self.agent_calls()
        self.assertEqual(len(calls), 2)
        for c in calls:
            # --launch-agent is split on whitespace; then HOST, then one command word.
            self.assertEqual(c[:3], ["-o", "BatchMode=yes", "fakehostA"])
            self.assertEqual(len(c), 4)
            self.assertIn("exec env ", c[3])

    def test_remote_wdir(self):
        sub = os.path.join(self.dir, "work dir")
        os.mkdir(sub)
        real = os.path.realpath(sub)
        # Default: chorusrun's own directory.
        reps = self.report(["-H", "localhost,fakehostA"] + self.agent_args(), 2, cwd=sub)
        self.assertEqual({r["cwd"] for r in reps.values()}, {real})
        # --wdir, absolute and relative (to chorusrun's directory).
        reps = self.report(["-H", "localhost,fakehostA", "--wdir", sub] + self.agent_args(), 2)
        self.assertEqual({r["cwd"] for r in reps.values()}, {real})
        reps = self.report(["-H", "localhost,fakehostA", "--wdir", "work dir"] + self.agent_args(),
                           2, cwd=self.dir)
        self.assertEqual({r["cwd"] for r in reps.values()}, {real})
        # A directory missing on the remote side fails that rank.
        rc, out, err, _ = run_in(["-H", "fakehostA", "--wdir", os.path.join(self.dir, "missing")]
                                 + self.agent_args() + ["true"], env=self.env)
        self.assertEqual(rc, 1, err)
        self.assertIn("chorusrun: rank 0 on fakehostA exited with status 1", err)

    def test_tag_output_names_hosts(self):
        rc, out, err, _ = run_in(["-H", "localhost,fakehostA:2", "--tag-output"] + self.agent_args()
                                 + ["sh", "-c", 'echo "out $CHORUS_RANK"; echo "err $CHORUS_RANK" >&2'],
                                 env=self.env)
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()),
                         ["[0,localhost] out 0", "[1,fakehostA] out 1", "[2,fakehostA] out 2"])
        self.assertEqual(sorted(err.splitlines()),
                         ["[0,localhost] err 0", "[1,fakehostA] err 1", "[2,fakehostA] err 2"])

    def remote_cpus(self, args, env=None):
        """{rank: set of CPUs} reported by ranks on fakehostA:2 (and the run's rc, stderr)."""
        report = 'echo "$CHORUS_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"'
        rc, out, err, _ = run_in(["-H", "fakehostA:2"] + args + self.agent_args()
                                 + ["sh", "-c", report], env=env or self.env)
        sets = {}
        for line in out.splitlines():
            rank, cpus = line.split(None, 1)
            sets[int(rank)] = cpu_list(cpus)
        return rc, sets, err

    def test_remote_ranks_bind_themselves(self):
        # chorusrun --bound-exec, run on the host through the agent, binds each rank as a
        # local rank would be (the expected sets as in test_binding.py).
        allowed = sorted(os.sched_getaffinity(0))
        rc, sets, err = self.remote_cpus([])
        self.assertEqual(rc, 0, err)
        if len(allowed) >= 2:  # one CPU: two ranks run unbound (more ranks than cores)
            self.assertEqual(len(sets[0] | sets[1]), len(sets[0]) + len(sets[1]), sets)
        for c in self.agent_calls():
            self.assertIn(" --bound-exec auto ", c[-1])
        rc, sets, err = self.remote_cpus(["--bind-to", "none"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sets, {0: set(allowed), 1: set(allowed)})

    def test_remote_binding_without_chorusrun_there(self):
        env = dict(self.env, FAKE_AGENT_MISSING=os.path.realpath(CHORUSRUN))
        rc, sets, err = self.remote_cpus([], env=env)
        self.assertEqual(rc, 0, err)  # auto: a note, and the ranks run unbound
        self.assertEqual(sets, {0: set(os.sched_getaffinity(0)), 1: set(os.sched_getaffinity(0))})
        self.assertIn("chorusrun: rank 0 on fakehostA: no /nonexistent-on-fakehostA", err)
        self.assertIn("there to bind it with; it runs unbound", err)
        rc, sets, err = self.remote_cpus(["--bind-to", "core"], env=env)
        self.assertEqual(rc, 127, err)  # core: asked for, so the rank fails
        self.assertIn("(--bind-to core; --bind-to none starts ranks unbound)", err)
        self.assertEqual(sets, {})

    def test_bound_exec_bad_arguments(self):
        for args in (["auto", "2", "2", "--", "true"], ["socket", "0", "1", "--", "true"],
                     ["core", "0", "1", "true"], ["core", "0", "1", "--"]):
            rc, out, err, _ = run_in(["--bound-exec"] + args)
            self.assertEqual(rc, 2, (args, err))
            self.assertIn("usage: chorusrun --bound-exec", err)
        rc, out, err, _ = run_in(["--bound-exec", "core", "0", "1", "--", "no-such-program-x"])
        self.assertEqual(rc, 127, err)
        self.assertIn("cannot execute 'no-such-program-x'", err)

    def test_agent_not_found(self):
        rc, out, err, _ = run_in(["-H", "localhost,fakehostA", "--launch-agent",
                                  os.path.join(self.dir, "no-such-agent"),
                                  "--rendezvous-addr", "127.0.0.1", "sleep", "30"], env=self.env)
        self.assertEqual(rc, 127, err)
        self.assertIn("rank 1 on fakehostA: cannot execute the launch agent", err)

    # --- failures and teardown ----------------------------------------------

    def remote_fail_test(self, mode):
        env = dict(self.env, FAKE_AGENT_MODE=mode)
        script = ('if [ $CHORUS_RANK = 3 ]; then echo $$ > "$D/p.3"; sleep 0.5; exit 3; fi; '
                  + SLEEPER)
        p = subprocess.Popen([CHORUSRUN, "-H", "localhost:2,fakehostA:2,fakehostB:2", "-np", "5",
                              "-x", "CHORUSRUN_TEST_TAG=" + self.tag, "-x", "D=" + self.dir]
                             + self.agent_args() + ["sh", "-c", script],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        t0 = time.monotonic()
        pids = read_pids(self.dir, ["p.0", "g.0", "p.1", "g.1", "p.2", "g.2", "p.3", "p.4", "g.4"])
        out, err = finish(p)
        elapsed = time.monotonic() - t0
        self.assertEqual(p.returncode, 3, err)
        self.assertLess(elapsed, 10, "surviving ranks were not killed promptly (they sleep 60 s)")
        lines = err.decode().splitlines()
        self.assertIn("chorusrun: rank 3 on fakehostA exited with status 3; "
                      "stopping the other 4 ranks", lines)
        self.assertEqual(sum("exited with status" in l or "killed by signal" in l for l in lines),
                         1, lines)
        agents = {n: int(n[2:]) for n in os.listdir(self.dir) if n.startswith("a.")}
        self.assertEqual(len(agents), 3 if mode == "fork" else 0)
        pids.update(agents)
        self.assert_all_dead(pids)

    def test_remote_failure_stops_all_agent_execs(self):
        self.remote_fail_test("exec")

    def test_remote_failure_stops_all_agent_stays(self):
        self.remote_fail_test("fork")

    def test_signal_and_timeout_reach_remote_ranks(self):
        env = dict(self.env, FAKE_AGENT_MODE="fork")
        base = ([CHORUSRUN, "-H", "localhost,fakehostA,fakehostB", "-x",
                 "CHORUSRUN_TEST_TAG=" + self.tag, "-x", "D=" + self.dir] + self.agent_args())
        names = ["%s.%d" % (k, r) for r in range(3) for k in "pg"]
        p = subprocess.Popen(base + ["sh", "-c", SLEEPER], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
        pids = read_pids(self.dir, names)
        p.send_signal(signal.SIGTERM)
        out, err = finish(p)
        self.assertEqual(p.returncode, 143, err)
        pids.update({n: int(n[2:]) for n in os.listdir(self.dir) if n.startswith("a.")})
        self.assert_all_dead(pids)
        for n in os.listdir(self.dir):
            if n[:2] in ("p.", "g.", "a."):
                os.unlink(os.path.join(self.dir, n))
        t0 = time.monotonic()
        p = subprocess.Popen(base[:1] + ["--timeout", "1"] + base[1:] + ["sh", "-c", SLEEPER],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        pids = read_pids(self.dir, names)
        out, err = finish(p)
        self.assertEqual(p.returncode, 124, err)
        self.assertLess(time.monotonic() - t0, 10)
        pids.update({n: int(n[2:]) for n in os.listdir(self.dir) if n.startswith("a.")})
        self.assert_all_dead(pids)

    # --- the bootstrap root chorusrun serves -----------------------------------

    def test_served_root_is_listening_and_survives_strangers(self):
        script = 'echo "$CHORUS_INIT"; sleep 2'
        p = subprocess.Popen([CHORUSRUN, "-H", "localhost,fakehostA"] + self.agent_args()
                             + ["sh", "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=self.env)
        init = p.stdout.readline().decode().strip()
        m = re.fullmatch(r"tcp://127\.0\.0\.1:(\d+)", init)
        self.assertIsNotNone(m, init)
        for junk in (b"", b"GET / HTTP/1.0\r\n\r\n", os.urandom(300)):
            with socket.create_connection(("127.0.0.1", int(m.group(1))), timeout=5) as c:
                c.sendall(junk)
        out, err = finish(p)
        self.assertEqual(p.returncode, 0, err)

    def probe(self, args, np, env=None):
        exe = os.environ.get("CHORUSRUN_PROBE")
        if not exe:
            self.skipTest("CHORUSRUN_PROBE (the rendezvous_probe program) is not set")
        rc, out, err, _ = run_in(args + [exe], env=env or self.env, timeout=60)
        self.assertEqual(rc, 0, err[-3000:])
        self.assertEqual(out, "probe ok %d %d\n" % (np, np * (np + 1) // 2), err[-3000:])

    def test_real_rendezvous_rank0_remote(self):
        # Rank 0 is "remote": only chorusrun's own root can be the rendezvous.
        self.probe(["-H", "fakehostA,localhost:2,fakehostB"] + self.agent_args(), 4)

    def test_real_rendezvous_all_local_hosts(self):
        self.probe(["-H", "localhost:3"], 3)

    def test_real_rendezvous_with_stranger(self):
        # A stranger connects first and says nothing useful; the job still meets.
        exe = os.environ.get("CHORUSRUN_PROBE")
        if not exe:
            self.skipTest("CHORUSRUN_PROBE is not set")
        script = ('if [ $CHORUS_RANK = 0 ]; then echo "$CHORUS_INIT" > "$D/init"; '
                  'while [ ! -e "$D/go" ]; do sleep 0.02; done; fi; exec "$0"')
        p = subprocess.Popen([CHORUSRUN, "-H", "fakehostA,fakehostB", "-x", "D=" + self.dir]
                             + self.agent_args() + ["sh", "-c", script, exe],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)
        path = os.path.join(self.dir, "init")
        deadline = time.monotonic() + 15
        while not (os.path.exists(path) and open(path).read().endswith("\n")):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.02)
        port = int(open(path).read().strip().rsplit(":", 1)[1])
        idle = socket.create_connection(("127.0.0.1", port), timeout=5)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            c.sendall(os.urandom(64))
        open(os.path.join(self.dir, "go"), "w").close()
        out, err = finish(p, timeout=60)
        idle.close()
        self.assertEqual(p.returncode, 0, err.decode()[-3000:])
        self.assertEqual(out.decode(), "probe ok 2 3\n")

    def test_rendezvous_addr_by_route(self):
        # 127.0.0.2 is not one of this machine's names, so it is "remote": the
        # address towards it comes from the route lookup (here: 127.0.0.1).
        rc, out, err, _ = run_in(["-H", "127.0.0.2:2", "--launch-agent", self.agent, "sh", "-c",
                                  'echo "$CHORUS_INIT $FAKE_HOST"'], env=self.env)
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertEqual(len(lines), 2, out)
        self.assertEqual(len(set(lines)), 1, out)
        self.assertRegex(lines[0], r"^tcp://127\.0\.0\.1:\d+ 127\.0\.0\.2$")
        self.assertEqual(len(self.agent_calls()), 2)
        rc, out, err, _ = run_in(["-H", "no-such-host.invalid", "--launch-agent", self.agent,
                                  "true"], env=self.env)
        self.assertEqual(rc, 1, err)
        self.assertIn("cannot resolve host 'no-such-host.invalid'", err)
        self.assertIn("--rendezvous-addr", err)
        self.assertEqual(len(self.agent_calls()), 2)

    def test_ipv6_rendezvous_addr(self):
        try:
            s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            s.bind(("::1", 0))
            s.close()
        except OSError:
            self.skipTest("no IPv6 loopback here")
        args = ["-H", "fakehostA", "--launch-agent", self.agent, "--rendezvous-addr", "::1"]
        rc, out, err, _ = run_in(args + ["sh", "-c", 'echo "$CHORUS_INIT"'], env=self.env)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"^tcp://\[::1\]:\d+\n$")
        if os.environ.get("CHORUSRUN_PROBE"):
            self.probe(["-H", "fakehostA:2", "--launch-agent", self.agent,
                        "--rendezvous-addr", "::1"], 2)


def cpu_list(text):
    """The CPUs of a Cpus_allowed_list ("0-2,5") as a set."""
    cpus = set()
    for part in text.strip().split(","):
        a, _, b = part.partition("-")
        if a:
            cpus.update(range(int(a), int(b or a) + 1))
    return cpus


def run_in(args, timeout=30, env=None, cwd=None, input=None):
    """run() with a working directory."""
    t0 = time.monotonic()
    p = subprocess.run([CHORUSRUN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, env=env, input=input, cwd=cwd)
    return p.returncode, p.stdout.decode(), p.stderr.decode(), time.monotonic() - t0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--rank":
        sys.exit(rank_main(sys.argv[2:]))
    if len(sys.argv) < 2:
        sys.exit("usage: %s /path/to/chorusrun [unittest args...]" % sys.argv[0])
    global CHORUSRUN
    CHORUSRUN = os.path.abspath(sys.argv[1])
    if not os.access(CHORUSRUN, os.X_OK):
        sys.exit("not an executable: %s" % CHORUSRUN)
    unittest.main(argv=[sys.argv[0]] + sys.argv[2:], verbosity=2)


if __name__ == "__main__":
    main()
