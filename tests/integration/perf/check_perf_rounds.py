#!/usr/bin/env python3
"""tools/perf-rounds on a tiny sweep: two interleaved rounds of Chorus and Open MPI with
one busy process beside them. Checks the table against the raw runs it was made from:
every size has both libraries' median and best, the ratio is Open MPI's median over
Chorus's, stability is best/median, and the CSV holds every round of both libraries.
A run that reports #wrong fails perf-rounds (status 1), and so this test.

Usage: check_perf_rounds.py TOOLS/perf-rounds BUILD
"""
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    tool, build = sys.argv[1], sys.argv[2]
    out = tempfile.mkdtemp(prefix="perf-rounds-test-")
    log_path = os.path.join(out, "perf-rounds.log")
    with open(log_path, "w") as log:
        p = subprocess.Popen([tool, "--np", "2", "--rounds", "2", "--load", "1", "--build", build,
                              "--out", out, "-b", "8", "-e", "4K", "-f", "8", "-n", "5", "-w",
                              "1"], stdout=log, stderr=subprocess.STDOUT, text=True)
    # The tool's busy loops are the ones below it: a busy loop anywhere else on the machine
    # (a load run beside the tests, another perf-rounds) is not the tool's to stop.
    loops = set()
    deadline = time.time() + 240
    while p.poll() is None and time.time() < deadline:
        loops |= {c for c in descendants(p.pid) if "while :; do :; done" in open_cmdline(c)}
        time.sleep(0.05)
    if p.poll() is None:
        p.kill()
        p.wait()
        raise AssertionError("perf-rounds did not finish in 240 s")
    stdout = open(log_path).read()
    assert p.returncode == 0, "perf-rounds failed:\n%s" % stdout
    assert "1 busy" in stdout or "stress-ng --cpu 1" in stdout, stdout
    assert loops or "stress-ng" in stdout, "no busy loop seen below perf-rounds --load 1"
    rows = list(csv.DictReader(open(os.path.join(out, "rounds.csv"))))
    times = {}
    for r in rows:
        times.setdefault((r["library"], int(r["size"])), []).append(float(r["time_us"]))
    sizes = [8, 64, 512, 4096]
    for lib in ("Chorus", "Open MPI"):
        for s in sizes:
            assert len(times.get((lib, s), [])) == 2, "%s %d B: %s" % (lib, s, times)
    table = main_table(os.path.join(out, "rounds.md"))
    assert len(table) == len(sizes), table
    for line, s in zip(table, sizes):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        c_med, c_best, m_med, m_best, ratio, c_st, m_st = map(float, cells[1:])
        c, m = times[("Chorus", s)], times[("Open MPI", s)]
        for got, want in ((c_med, statistics.median(c)), (c_best, min(c)),
                          (m_med, statistics.median(m)), (m_best, min(m))):
            assert abs(got - want) <= 0.006 + 1e-3 * want, (s, line, got, want)
        want_ratio = statistics.median(m) / statistics.median(c)
        assert abs(ratio - want_ratio) <= 0.006, (line, want_ratio)
        assert abs(c_st - min(c) / statistics.median(c)) <= 0.006, line
        assert abs(m_st - min(m) / statistics.median(m)) <= 0.006, line
    # No busy loop is left behind.
    left = still_there(lambda: sorted(c for c in loops if alive(c)))
    assert not left, "busy loops left running: %s" % left
    print("perf-rounds: %d sizes, both libraries, 2 rounds: table matches the raw runs" %
          len(sizes))
    check_auto_iterations(tool, build)
    check_windows(tool)
    check_failed_peer_sits_out(tool, build)
    check_sigterm_stops_everything(tool, build)


def main_table(path):
    """The rows of the first table (medians over all runs), not the per-window one after it."""
    rows, started = [], False
    for line in open(path):
        if line.startswith("| size"):
            if started:
                break
            started = True
        elif started and line.startswith("| "):
            rows.append(line)
        elif started and rows and not line.startswith("|"):
            break
    return rows


def check_windows(tool):
    """The per-window table from runs whose probes say fast (~110 ns) or slow (~500 ns): each
    library's median over only its runs of that window, and no windows where every probe
    took over a microsecond (the scheduler, not the cores' distance) or all were alike."""
    from importlib.machinery import SourceFileLoader
    pr = SourceFileLoader("perf_rounds", tool).load_module()
    row = lambda t: {"time_us": str(t), "busbw": "1"}
    runs = [(1, "chorus", "all_reduce", 2, {8: row(1.0)}, 110.0),
            (1, "mpi", "all_reduce", 2, {8: row(3.0)}, 520.0),
            (2, "mpi", "all_reduce", 2, {8: row(2.0)}, 115.0),
            (2, "chorus", "all_reduce", 2, {8: row(1.5)}, 108.0),
            (3, "chorus", "all_reduce", 2, {8: row(4.0)}, 505.0),
            (3, "mpi", "all_reduce", 2, {8: row(5.0)}, 498.0)]
    cut = pr.window_cut([r[5] for r in runs])
    assert cut is not None and 115 < cut < 498, cut
    lines = [l for l in pr.window_table(runs, "all_reduce", 2, cut)
             if l.startswith("| 8 B")]
    assert lines == ["| 8 B | fast | 1.25 (2) | 2.00 (1) | 1.60 | 0.80 |",
                     "| 8 B | slow | 4.00 (1) | 4.00 (2) | 1.00 | 1.00 |"], lines
    assert pr.window_cut([110, 130, 120]) is None
    assert pr.window_cut([4500, 14000]) is None
    print("perf-rounds windows: per-window medians from the probes, none from scheduler noise")
    check_pairs(pr)
    check_peer_table(pr)
    check_timeout_kills_everything(pr)


def descendants(pid):
    """pids of every process below `pid` (children, their children, ...), from /proc."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, todo = set(), [pid]
    while todo:
        here = todo.pop()
        kids = [c for c, pp in parent.items() if pp == here]
        found.update(kids)
        todo += kids
    return found


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def check_sigterm_stops_everything(tool, build):
    """perf-rounds stopped by SIGTERM (what `timeout` sends) stops its busy processes and the
    run in flight: both run in sessions of their own, and a timed-out sweep once left two
    busy loops spinning beside every later measurement for minutes. Every process seen below
    the tool while it ran must be gone after."""
    out = tempfile.mkdtemp(prefix="perf-rounds-sigterm-")
    p = subprocess.Popen([tool, "--np", "2", "--rounds", "200", "--load", "1", "--build", build,
                          "--out", out, "-b", "8", "-e", "8", "-n", "2000", "-w", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen, ranks = set(), False
    deadline = time.time() + 60
    while time.time() < deadline and not (ranks and len(seen) >= 3):
        below = descendants(p.pid)
        seen |= below
        ranks = ranks or any("perf" in open_cmdline(c) for c in below)
        time.sleep(0.05)
    assert seen and ranks, "perf-rounds --load 1 started no busy process or rank: %s" % seen
    p.terminate()
    p.wait(timeout=30)
    left = still_there(lambda: sorted(c for c in seen if alive(c)))
    assert not left, "left running after SIGTERM: %s" % [(c, open_cmdline(c)) for c in left]
    print("perf-rounds SIGTERM: busy processes and the run in flight stopped (%d processes)" %
          len(seen))


def still_there(find, within=10.0):
    """What find() returns once it returns nothing, or after `within` seconds. A process
    sent SIGKILL is gone only once it has run its exit: on a busy machine that can come
    after the killer has returned (check_timeout_kills_everything's pgrep found the two
    killed sleepers in 6 of 100 runs beside two busy loops); one never killed stays."""
    deadline = time.time() + within
    left = find()
    while left and time.time() < deadline:
        time.sleep(0.05)
        left = find()
    return left


def open_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid) as f:
            return f.read().replace("\0", " ")
    except OSError:
        return ""


def check_failed_peer_sits_out(tool, build):
    """A peer whose run fails sits out the rest of that collective, the re-run of its own pair
    included: Chorus's rounds go on and are tabled, the peer is not run again (before, one
    failed peer run threw every round away). Open MPI is made to fail by a stand-in for its
    run_one; Chorus runs for real. The round-trip probe is a stand-in too: it reads a window
    change within round 1's pair (its second reading only), so that pair runs twice, every
    time; the real probe made that happen at random on a loaded machine, and the failed peer
    was run again in the re-run."""
    from importlib.machinery import SourceFileLoader
    pr = SourceFileLoader("perf_rounds_sitout", tool).load_module()
    real, tried, probes = pr.pc.run_one, [], []

    def failing_mpi(launcher, lib, *rest):
        tried.append(lib)
        if lib == "mpi":
            raise pr.pc.Failed("mpi made to fail by the test")
        return real(launcher, lib, *rest)

    def probe(build):
        probes.append(build)
        return 1000 if len(probes) == 2 else 100
    pr.pc.run_one = failing_mpi
    pr.pingpong_ns = probe
    out = tempfile.mkdtemp(prefix="perf-rounds-sitout-")
    try:
        status = pr.main(["--np", "2", "--rounds", "3", "--build", build, "--out", out,
                          "-b", "8", "-e", "64", "-f", "8", "-n", "5", "-w", "1"])
    finally:
        pr.pc.run_one = real
    assert status == 0, status
    # Round 1: Chorus, Open MPI (fails), and the pair again (Chorus alone); rounds 2 and 3.
    assert tried == ["chorus", "mpi", "chorus", "chorus", "chorus"], tried
    rows = list(csv.DictReader(open(os.path.join(out, "rounds.csv"))))
    seen = sorted((r["library"], r["round"], int(r["size"])) for r in rows)
    assert seen == [("Chorus", str(r), s) for r in (1, 2, 3) for s in (8, 64)], seen
    print("perf-rounds: a failed peer sits out, Chorus's 3 rounds are kept")


def check_timeout_kills_everything(pr):
    """A run out of --timeout is killed with every process it started, not only the
    launcher: a peer's ranks left spinning (oneCCL's at np 4) made every later run time out
    behind them. The launcher here is a shell that starts two sleepers and waits."""
    mark = "317.%d" % os.getpid()  # a sleep length no other process uses

    class Sleepers:
        def command(self, lib, coll, np, flags, scratch):
            return ["sh", "-c", "sleep %s & sleep %s & wait" % (mark, mark)], {}
    raw = tempfile.mkdtemp(prefix="perf-rounds-timeout-")
    try:
        pr.pc.run_one(Sleepers(), "mpi", "all_reduce", 4, [], raw, raw, 1)
        raise AssertionError("a run past its timeout returned")
    except pr.pc.Failed as e:
        assert "timed out after 1 s" in str(e), e
    left = still_there(lambda: subprocess.run(["pgrep", "-f", "sleep %s" % mark],
                                              capture_output=True, text=True).stdout.split())
    assert not left, "processes of a timed-out run left running: %s" % left
    print("perf-rounds timeout: the launcher and everything it started are gone")


def check_peer_table(pr):
    """Several peers (--libs chorus,mpi,impi,ccl): each peer's median and ratio, the best peer
    at each size and the ratio against it, '-' for a collective a peer lacks; the per-window
    table's ratio is against the best peer too."""
    row = lambda t: {"time_us": str(t), "busbw": "1"}
    runs = []
    for rnd, times in enumerate(([2.0, 4.0, 3.0, 8.0], [2.2, 5.0, 2.0, 9.0],
                                 [1.8, 4.5, 2.5, 7.0]), 1):
        for lib, t in zip(("chorus", "mpi", "impi", "ccl"), times):
            runs.append((rnd, lib, "all_reduce", 2, {8: row(t), 64: row(10 * t)}, 110.0))
    runs += [(1, "chorus", "gather", 2, {8: row(1.0)}, 110.0),
             (1, "mpi", "gather", 2, {8: row(0.5)}, 110.0),
             (1, "impi", "gather", 2, {8: row(3.0)}, 110.0)]
    peers = ["mpi", "impi", "ccl"]
    libs = ["chorus"] + peers
    lines = pr.main_table(pr.summarize(runs, "all_reduce", 2, libs), peers)
    assert lines[0].startswith("| size | Chorus median µs | Chorus best µs | Open MPI median") \
        and "ratio vs best peer" in lines[0], lines[0]
    # Medians: Chorus 2.0 (best 1.8), Open MPI 4.5, Intel MPI 2.5, oneCCL 8.0.
    assert lines[2] == ("| 8 B | 2.00 | 1.80 | 4.50 | 2.50 | 8.00 | 2.25 | 1.25 | 4.00 | "
                        "Intel MPI | 1.25 | 0.90 |"), lines[2]
    assert lines[3].startswith("| 64 B | 20.00 | 18.00 | 45.00 | 25.00 | 80.00 |"), lines[3]
    lines = pr.main_table(pr.summarize(runs, "gather", 2, libs), peers)
    assert lines[2] == ("| 8 B | 1.00 | 1.00 | 0.50 | 3.00 | - | 0.50 | 3.00 | - | "
                        "Open MPI | 0.50 | 1.00 |"), lines[2]
    win = [l for l in pr.window_table(runs, "gather", 2, 200.0, peers) if l.startswith("| 8 B")]
    assert win == ["| 8 B | fast | 1.00 (1) | 0.50 (1) | 3.00 (1) | - | 0.50 | 1.00 |"], win
    print("perf-rounds peers: each peer's ratio, the best peer and the ratio against it")


def check_pairs(pr):
    """A pair whose probes say the window changed within it runs again, up to the limit, and
    the last attempt is what is kept; a pair within one window (or under a busy machine's
    noise, every probe over a microsecond) runs once."""
    def fake(probes):
        seq = iter(probes)
        calls = []

        def run_lib(lib):
            calls.append(lib)
            return {8: {"time_us": str(len(calls)), "busbw": "1"}}, 0.1
        return run_lib, (lambda: next(seq)), calls

    # Flipped in the first attempt (110 -> 520), one window in the second.
    run_lib, probe, calls = fake([110, 520, 515, 112, 108, 111])
    got, redone = pr.run_pair(("chorus", "mpi"), run_lib, probe, 3)
    assert redone == 1 and calls == ["chorus", "mpi", "chorus", "mpi"], (redone, calls)
    assert got["chorus"][0][8]["time_us"] == "3" and got["mpi"][0][8]["time_us"] == "4", got
    assert got["chorus"][2] == 112 and got["mpi"][2] == 108, got
    # The window changed after the last run (the closing probe): also re-run.
    run_lib, probe, calls = fake([110, 112, 530, 520, 515, 525])
    got, redone = pr.run_pair(("mpi", "chorus"), run_lib, probe, 3)
    assert redone == 1 and calls == ["mpi", "chorus"] * 2, (redone, calls)
    # Out of re-runs: the last attempt is kept even though it flipped.
    run_lib, probe, calls = fake([110, 520, 110, 520, 110, 520])
    got, redone = pr.run_pair(("chorus", "mpi"), run_lib, probe, 1)
    assert redone == 1 and len(calls) == 4, (redone, calls)
    # --match-windows 0, and probes that timed the scheduler: one attempt each.
    run_lib, probe, calls = fake([110, 520, 515])
    assert pr.run_pair(("chorus", "mpi"), run_lib, probe, 0)[1] == 0 and len(calls) == 2
    run_lib, probe, calls = fake([1800, 4200, 1700])
    assert pr.run_pair(("chorus", "mpi"), run_lib, probe, 3)[1] == 0 and len(calls) == 2
    print("perf-rounds pairs: re-run while the window changed within them, last attempt kept")


def header_iters(path):
    """(warm-up, iterations) from a perf binary's header line."""
    for line in open(path):
        if line.startswith("# nThread"):
            words = line.split()
            return (int(words[words.index("warmup") + 2]), int(words[words.index("iters:",
                    words.index("warmup") + 3) + 1]))
    raise AssertionError("no header in %s" % path)


def check_auto_iterations(tool, build):
    """-n auto (the default): each size gets the iteration count of its own (512 MiB per
    timed loop, 20-20000), in one sweep per count, the same for both libraries."""
    out = tempfile.mkdtemp(prefix="perf-rounds-auto-")
    p = subprocess.run([tool, "--np", "2", "--rounds", "1", "--build", build, "--out", out,
                        "-b", "256K", "-e", "2M", "-f", "8"],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, "perf-rounds -n auto failed:\n%s\n%s" % (p.stdout, p.stderr)
    want = {"sweep1": (204, 2048), "sweep2": (25, 256)}  # 256 KiB, 2 MiB
    for sweep, (w, n) in want.items():
        for lib in ("chorus", "mpi"):
            got = header_iters(os.path.join(out, "raw", "round1", sweep,
                                            "%s.all_reduce.np2.txt" % lib))
            assert got == (w, n), (sweep, lib, got, (w, n))
    rows = list(csv.DictReader(open(os.path.join(out, "rounds.csv"))))
    seen = sorted({(r["library"], int(r["size"])) for r in rows})
    assert seen == [("Chorus", 262144), ("Chorus", 2097152), ("Open MPI", 262144),
                    ("Open MPI", 2097152)], seen
    assert "-n 2048 -w 204" in p.stdout and "-n 256 -w 25" in p.stdout, p.stdout
    print("perf-rounds -n auto: 2048 and 256 iterations at 256 KiB and 2 MiB, both libraries")


if __name__ == "__main__":
    main()
