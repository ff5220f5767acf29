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


def main():
    tool, build = sys.argv[1], sys.argv[2]
    out = tempfile.mkdtemp(prefix="perf-rounds-test-")
    p = subprocess.run([tool, "--np", "2", "--rounds", "2", "--load", "1", "--build", build,
                        "--out", out, "-b", "8", "-e", "4K", "-f", "8", "-n", "5", "-w", "1"],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, "perf-rounds failed:\n%s\n%s" % (p.stdout, p.stderr)
    assert "1 busy" in p.stdout or "stress-ng --cpu 1" in p.stdout, p.stdout
    rows = list(csv.DictReader(open(os.path.join(out, "rounds.csv"))))
    times = {}
    for r in rows:
        times.setdefault((r["library"], int(r["size"])), []).append(float(r["time_us"]))
    sizes = [8, 64, 512, 4096]
    for lib in ("Chorus", "Open MPI"):
        for s in sizes:
            assert len(times.get((lib, s), [])) == 2, "%s %d B: %s" % (lib, s, times)
    table = [l for l in open(os.path.join(out, "rounds.md")) if l.startswith("| ") and
             not l.startswith("| size")]
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
    left = subprocess.run(["pgrep", "-f", "while :; do :; done"], capture_output=True,
                          text=True).stdout.split()
    assert not left, "busy loops left running: %s" % left
    print("perf-rounds: %d sizes, both libraries, 2 rounds: table matches the raw runs" %
          len(sizes))
    check_auto_iterations(tool, build)


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
