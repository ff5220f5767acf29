#!/usr/bin/env python3
"""tools/perf-rounds with the Intel MPI and oneCCL peers (-Dintel=PREFIX) on a tiny sweep:
one round of Chorus, Open MPI, Intel MPI and oneCCL for all_reduce and gather (oneCCL has no
gather: it sits that one out). Checks that every library's raw run checked its results,
that the CSV holds each library's row per size, and that the table's peer medians, ratios,
best peer and ratio against it are the CSV's. Exit 77 (skipped, never a pass) when Intel
MPI's mpirun is not in PREFIX.

Usage: check_perf_rounds_peers.py TOOLS/perf-rounds BUILD PREFIX
"""
import csv
import os
import subprocess
import sys
import tempfile


def main():
    tool, build, prefix = sys.argv[1:4]
    if not os.access(os.path.join(prefix, "bin", "mpirun"), os.X_OK):
        print("SKIP: no Intel MPI mpirun in %s (tools/deps-peers)" % prefix)
        return 77
    out = tempfile.mkdtemp(prefix="perf-rounds-peers-")
    p = subprocess.run([tool, "--libs", "chorus,mpi,impi,ccl", "--intel", prefix,
                        "--coll", "all_reduce,gather", "--np", "2", "--rounds", "1",
                        "--match-windows", "0", "--build", build, "--out", out,
                        "-b", "64", "-e", "4K", "-f", "64", "-n", "5", "-w", "1"],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, "perf-rounds failed:\n%s\n%s" % (p.stdout, p.stderr)
    assert "oneCCL sits out gather" in p.stderr, p.stderr
    rows = list(csv.DictReader(open(os.path.join(out, "rounds.csv"))))
    times = {(r["library"], r["collective"], int(r["size"])): float(r["time_us"]) for r in rows}
    titles = ["Chorus", "Open MPI", "Intel MPI", "oneCCL"]
    for coll, libs in (("all_reduce", titles), ("gather", titles[:3])):
        for lib in libs:
            for size in (64, 4096):
                assert (lib, coll, size) in times, (lib, coll, size, sorted(times))
    assert not any(k[0] == "oneCCL" and k[1] == "gather" for k in times), times
    for lib in ("impi", "ccl"):
        text = open(os.path.join(out, "raw", "round1", "%s.all_reduce.np2.txt" % lib)).read()
        assert "# Out of bounds values : 0 OK" in text, text
    md = open(os.path.join(out, "rounds.md")).read()
    for coll, peers in (("all_reduce", titles[1:]), ("gather", titles[1:3])):
        line = [l for l in md.split("## %s, np 2" % coll)[1].splitlines()
                if l.startswith("| 64 B")][0]
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        c = times[("Chorus", coll, 64)]
        meds = {t: times.get((t, coll, 64)) for t in titles[1:]}
        for i, t in enumerate(titles[1:]):
            want = "-" if meds[t] is None else "%.2f" % meds[t]
            assert cells[3 + i] == want, (coll, t, cells, want)
        best = min((m, t) for t, m in meds.items() if m is not None)
        assert cells[9] == best[1], (coll, cells, best)
        assert abs(float(cells[10]) - best[0] / c) <= 0.006 + 0.01 * best[0] / c, (cells, best, c)
    print("perf-rounds with Intel MPI and oneCCL: every peer ran and checked, table = CSV")
    return 0


if __name__ == "__main__":
    sys.exit(main())
