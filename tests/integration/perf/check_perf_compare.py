#!/usr/bin/python3
"""Checks tools/perf-compare end to end on a tiny sweep.

Usage: check_perf_compare.py PERF_COMPARE BUILD_DIR

Runs `perf-compare --np 2 --coll all_reduce -b 8 -e 64K -n 1 -w 0` into a temporary
directory and asserts: results.csv has out-of-place and in-place rows of Chorus, Open MPI
and Gloo for every size with #wrong 0; results.md has the all_reduce table with a time,
algbw and busbw column per library and a row per size; all_reduce.png exists and is a PNG
(magic bytes); the raw Gloo table passes the nccl-tests format checks of
check_perf_output.py (13 columns, units, busbw = algbw * 2(n-1)/n, footer). Then that
perf-compare fails loudly (status 1, a FAILED line) when a binary reports #wrong != 0
(CHORUS_PERF_INJECT_ERROR=1), and that `--tuning` on 8-64 B writes tuning.csv and
tuning.md with auto's choice and both ratios (auto/best, choice/best). Exits 77
(skipped) when the Open MPI or Gloo twins or matplotlib are not available. Standard
library only.
"""

import csv
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_perf_output import Failure, check_output, expect, sizes  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FLAGS = ["--np", "2", "--coll", "all_reduce", "-b", "8", "-e", "64K", "-n", "1", "-w", "0"]
WANT_SIZES = sizes(8, 64 * 1024, 4)  # perf-compare's default -f 4
LIBS = ["Chorus", "Open MPI", "Gloo"]


def run(cmd, env=None, timeout=300):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, env=env, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def check_results(out):
    with open(os.path.join(out, "results.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    for lib in LIBS:
        mine = [r for r in rows if r["library"] == lib]
        expect(mine, "results.csv has no %s rows" % lib)
        for placement in ("out-of-place", "in-place"):
            got = [int(r["size"]) for r in mine if r["placement"] == placement]
            expect(got == WANT_SIZES, "%s %s sizes %r, want %r" % (lib, placement, got,
                                                                    WANT_SIZES))
        for r in mine:
            expect(r["collective"] == "all_reduce" and r["nranks"] == "2",
                   "collective/nranks columns: %r" % r)
            expect(r["wrong"] == "0", "%s #wrong %s: %r" % (lib, r["wrong"], r))
            expect(float(r["time_us"]) > 0, "%s time not positive: %r" % (lib, r))

    with open(os.path.join(out, "results.md")) as f:
        md = f.read().splitlines()
    heads = [l for l in md if l.startswith("| size |")]
    expect(len(heads) == 1, "want one table header in results.md, got %d" % len(heads))
    for lib in LIBS:
        for col in ("time (us)", "algbw (GB/s)", "busbw (GB/s)"):
            expect("| %s %s |" % (lib, col) in heads[0] + "|", "no '%s %s' column" % (lib, col))
    body = [l for l in md if l.startswith("| ") and not l.startswith("| size |")]
    expect(len(body) == len(WANT_SIZES), "want %d table rows, got %d" % (len(WANT_SIZES),
                                                                        len(body)))
    for l in body:
        cells = [c.strip() for c in l.strip("|").split("|")]
        expect(len(cells) == 1 + 3 * len(LIBS), "table row has %d cells: %r" % (len(cells), l))

    png = os.path.join(out, "all_reduce.png")
    expect(os.path.isfile(png), "all_reduce.png missing")
    with open(png, "rb") as f:
        expect(f.read(8) == PNG_MAGIC, "all_reduce.png is not a PNG")
    expect(os.path.getsize(png) > 1000, "all_reduce.png is suspiciously small")

    with open(os.path.join(out, "raw", "gloo.all_reduce.np2.txt")) as f:
        gloo = f.read()
    expect("# Backend: gloo " in gloo, "the Gloo table does not name its backend")
    n = check_output(gloo, 2, True, [("float", "sum")], WANT_SIZES)
    return n


TUNING_FLAGS = ["--tuning", "--np", "2", "--rounds", "2", "-b", "8", "-e", "64"]


def raw_times(out, algo, size):
    """Every round's out-of-place time of one forced algorithm at one size, from the raw
    CSVs the perf binary wrote (raw/<algo>.np2.<sweep>.r<round>.csv)."""
    times = []
    for name in sorted(os.listdir(os.path.join(out, "raw"))):
        if not (name.startswith(algo + ".np2.") and name.endswith(".csv")):
            continue
        with open(os.path.join(out, "raw", name), newline="") as f:
            for r in csv.DictReader(f):
                if r["placement"] == "out-of-place" and int(r["size"]) == size:
                    times.append(float(r["time_us"]))
    return times


def check_tuning(out):
    """tuning.csv: one row per size 8..64 B; auto ran direct (the LL threshold is 16 KiB
    and the model picks direct for tiny calls on shared memory); auto_over_best and
    choice_over_best are the quotients of the time columns they name."""
    with open(os.path.join(out, "tuning.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    expect([int(r["size"]) for r in rows] == [8, 16, 32, 64],
           "tuning.csv sizes %r" % [r["size"] for r in rows])
    for r in rows:
        forced = {a: float(r[a + "_us"]) for a in ("direct", "ring", "tree")}
        best = min(forced, key=forced.get)
        expect(r["best_forced"] == best, "best_forced %r, times %r" % (r["best_forced"], forced))
        expect(r["auto_choice"] == "direct", "auto chose %r for %s B" % (r["auto_choice"], r["size"]))
        expect(abs(float(r["auto_over_best"]) - float(r["auto_us"]) / forced[best]) < 1e-3,
               "auto_over_best %r" % r)
        expect(abs(float(r["choice_over_best"]) - forced["direct"] / forced[best]) < 1e-3,
               "choice_over_best %r" % r)
    md = open(os.path.join(out, "tuning.md")).read()
    expect("| choice/best |" in md, "tuning.md has no choice/best column")
    expect("| best's spread |" in md, "tuning.md has no spread column")
    expect("Widest spread of one forced algorithm's 2 runs" in md, "tuning.md has no spread line")
    # The spread is the best forced algorithm's slowest over fastest of its two rounds, from
    # the raw runs; the table's best time is the fastest of them.
    for r in rows:
        times = raw_times(out, r["best_forced"], int(r["size"]))
        expect(len(times) == 2, "%s B %s: %r rounds" % (r["size"], r["best_forced"], times))
        expect(abs(float(r["best_spread"]) - max(times) / min(times)) < 1e-3,
               "best_spread %r against rounds %r" % (r, times))
        expect(abs(float(r[r["best_forced"] + "_us"]) - min(times)) < 1e-2,
               "best time %r against rounds %r" % (r, times))
    expect("Worst choice/best at np 2:" in md, "tuning.md has no choice/best summary")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    tool, build = sys.argv[1], sys.argv[2]
    for peer in ("all_reduce_mpi_perf", "all_reduce_gloo_perf"):
        if not os.access(os.path.join(build, "perf", peer), os.X_OK):
            print("SKIP: %s not built (needs Open MPI and libgloo-dev)" % peer)
            return 77
    if run(["/usr/bin/python3", "-c", "import matplotlib"])[0] != 0:
        print("SKIP: python3-matplotlib is not installed")
        return 77

    failed = 0
    with tempfile.TemporaryDirectory(prefix="perf-compare-test-") as tmp:
        label = "perf-compare %s" % " ".join(FLAGS)
        out = os.path.join(tmp, "ok")
        try:
            rc, so, se = run([tool, "--build", build, "--out", out] + FLAGS)
            expect(rc == 0, "exit status %d\n--- stdout\n%s\n--- stderr\n%s" % (rc, so, se[-3000:]))
            rows = check_results(out)
            print("ok   %s (Gloo table: %d rows)" % (label, rows))
        except (Failure, OSError, KeyError, ValueError, subprocess.TimeoutExpired) as e:
            failed += 1
            print("FAIL %s: %s" % (label, e))
        sys.stdout.flush()

        label = "perf-compare %s" % " ".join(TUNING_FLAGS)
        try:
            tout = os.path.join(tmp, "tuning")
            rc, so, se = run([tool, "--build", build, "--out", tout] + TUNING_FLAGS)
            expect(rc == 0, "exit status %d\n--- stderr\n%s" % (rc, se[-3000:]))
            check_tuning(tout)
            print("ok   %s" % label)
        except (Failure, OSError, KeyError, ValueError, subprocess.TimeoutExpired) as e:
            failed += 1
            print("FAIL %s: %s" % (label, e))
        sys.stdout.flush()

        label = "perf-compare fails loudly on #wrong != 0"
        bad = os.path.join(tmp, "bad")
        try:
            env = dict(os.environ, CHORUS_PERF_INJECT_ERROR="1")
            rc, so, se = run([tool, "--build", build, "--out", bad] + FLAGS, env=env)
            expect(rc == 1, "exit status %d, want 1\n%s" % (rc, se[-2000:]))
            expect("perf-compare: FAILED:" in se, "no FAILED line on stderr:\n%s" % se[-2000:])
            expect("**FAILED**" in open(os.path.join(bad, "results.md")).read(),
                   "results.md does not say FAILED")
            print("ok   %s" % label)
        except (Failure, OSError, subprocess.TimeoutExpired) as e:
            failed += 1
            print("FAIL %s: %s" % (label, e))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
