#!/usr/bin/env python3
"""repro_cost_table.py — the table of perf/repro_cost.sh: per collective and size, the median
time (µs) over the rounds with CHORUS_REPRODUCIBLE=0 and =1, out of place, and the ratio
(reproducible / default) out of place and in place, two ways: the ratio of the medians, and
the paired ratio, the median over rounds of each round's reproducible time over the same
round's default (the two launches of a round run back to back, so a paired ratio compares
them in the same window of a machine whose speed moves between windows); `!` marks a ratio
over the limit of issue 36 (1.3x from 64 KiB, 2x below).

Usage: perf/repro_cost_table.py DIR COLL...
  DIR holds <coll>.<small|big>.m<0|1>.r<round>.csv (the perf binaries' --csv files).
"""
import csv
import glob
import os
import statistics
import sys


def times(d, coll):
    """{(mode, placement): {bytes: {round: µs}}}, and the round count."""
    t, rounds = {}, set()
    for f in glob.glob(os.path.join(d, coll + ".*.csv")):
        _, part, mode, rnd, _ = os.path.basename(f).split(".")
        rounds.add(rnd)
        for row in csv.reader(open(f)):
            if row and row[0] != "collective":
                t.setdefault((mode, row[8]), {}).setdefault(int(row[3]), {})[(part, rnd)] = \
                    float(row[9])
    return t, len(rounds)


def medians(t):
    """{(mode, placement): {bytes: median µs}}."""
    return {k: {s: statistics.median(v.values()) for s, v in sz.items()} for k, sz in t.items()}


def paired(t, placement, s):
    """The median over rounds of reproducible / default in the same round, or None."""
    a, b = t.get(("m0", placement), {}).get(s, {}), t.get(("m1", placement), {}).get(s, {})
    r = [b[k] / a[k] for k in a if k in b and a[k] > 0]
    return statistics.median(r) if r else None


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
        t, rounds = times(d, coll)
        m = medians(t)
        print("\n%s, medians of %d rounds (µs), ratio = reproducible / default (of the medians;"
              " paired: the median of the rounds' ratios)" % (coll, rounds))
        print("| size | default | reproducible | ratio | ratio in place | paired | paired in place |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
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
            for placement in ("out-of-place", "in-place"):
                r = paired(t, placement, s)
                cells.append("-" if r is None else "%.2f%s" % (r, " !" if r > limit else ""))
                if r is not None and r > limit:
                    over.append("%s %s %s: paired %.2fx (limit %.1fx)" % (
                        coll, size_name(s), placement.replace("-", " "), r, limit))
            print("| %s | %.3g | %.3g | %s |" % (size_name(s), oop0[s], oop1[s],
                                                 " | ".join(cells)))
    print("\nover the limit: %s" % ("; ".join(over) if over else "none"))


if __name__ == "__main__":
    main()
