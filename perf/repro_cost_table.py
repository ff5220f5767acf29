#!/usr/bin/env python3
"""repro_cost_table.py — the table of perf/repro_cost.sh: per collective and size, the median
time (µs) over the rounds with CHORUS_REPRODUCIBLE=0 and =1, out of place, and the ratio
(reproducible / default) out of place and in place; `!` marks a ratio over the limit of
issue 36 (1.3x from 64 KiB, 2x below).

Usage: perf/repro_cost_table.py DIR COLL...
  DIR holds <coll>.<small|big>.m<0|1>.r<round>.csv (the perf binaries' --csv files).
"""
import csv
import glob
import os
import statistics
import sys


def medians(d, coll):
    """{(mode, placement): {bytes: median µs}}, and the round count."""
    t, rounds = {}, set()
    for f in glob.glob(os.path.join(d, coll + ".*.csv")):
        _, _, mode, rnd, _ = os.path.basename(f).split(".")
        rounds.add(rnd)
        for row in csv.reader(open(f)):
            if row and row[0] != "collective":
                t.setdefault((mode, row[8]), {}).setdefault(int(row[3]), []).append(float(row[9]))
    return {k: {s: statistics.median(v) for s, v in sz.items()} for k, sz in t.items()}, len(rounds)


def size_name(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return "%d %s" % (b // n, unit)
    return "%d B" % b


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    d, over = sys.argv[1], []
    for coll in sys.argv[2:]:
        m, rounds = medians(d, coll)
        print("\n%s, medians of %d rounds (µs), ratio = reproducible / default" % (coll, rounds))
        print("| size | default | reproducible | ratio | ratio in place |")
        print("|---:|---:|---:|---:|---:|")
        oop0, oop1 = m.get(("m0", "out-of-place"), {}), m.get(("m1", "out-of-place"), {})
        ip0, ip1 = m.get(("m0", "in-place"), {}), m.get(("m1", "in-place"), {})
        for s in sorted(oop0):
            if s not in oop1:
                continue
            limit = 1.3 if s >= 64 << 10 else 2.0
            cells = []
            for a, b in ((oop0, oop1), (ip0, ip1)):
                if s in a and s in b and a[s] > 0:
                    r = b[s] / a[s]
                    cells.append("%.2f%s" % (r, " !" if r > limit else ""))
                    if r > limit:
                        over.append("%s %s %s: %.2fx (%.3g against %.3g µs; limit %.1fx)" % (
                            coll, size_name(s), "out of place" if a is oop0 else "in place",
                            r, b[s], a[s], limit))
                else:
                    cells.append("-")
            print("| %s | %.3g | %.3g | %s | %s |" % (size_name(s), oop0[s], oop1[s], cells[0],
                                                      cells[1]))
    print("\nover the limit: %s" % ("; ".join(over) if over else "none"))


if __name__ == "__main__":
    main()
