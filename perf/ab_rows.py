#!/usr/bin/env python3
"""ab_rows.py — the tables of perf/ab_two_builds.sh and perf/ab_variants.sh, from their run
files OUT/<coll>.<label>.<round>.txt (each a perf binary's stdout). Times come from algbw
(size / algbw), which keeps three digits where the time column shows two.

Usage: perf/ab_rows.py two-builds OUT          (labels base, new, mpi; out of and in place)
       perf/ab_rows.py variants OUT L1 L2 ...  (out of place; L1 over L2 in the last column)
"""
import collections
import glob
import os
import statistics
import sys


def read(out):
    """{(coll, label, size, 'oop' | 'ip'): [µs per round]} and the count of wrong results."""
    t = collections.defaultdict(list)
    wrong = 0
    for f in glob.glob(os.path.join(out, "*.txt")):
        c, label, _, _ = os.path.basename(f).split(".")
        for line in open(f):
            p = line.split()
            if len(p) >= 13 and p[0].isdigit():
                sz = int(p[0])
                t[(c, label, sz, "oop")].append(sz / float(p[6]) / 1e3)
                t[(c, label, sz, "ip")].append(sz / float(p[10]) / 1e3)
                wrong += int(p[8]) + int(p[12])
    return t, wrong


def two_builds(out):
    t, wrong = read(out)
    print("wrong results:", wrong)
    for k in sorted(t):
        print(k, " ".join("%.3f" % x for x in t[k]))
    print("%-10s %6s %3s %8s %8s %8s  %6s %6s" %
          ("coll", "size", "pl", "base", "new", "mpi", "mpi/new", "base/new"))
    for c, s, pl in sorted(set((k[0], k[2], k[3]) for k in t)):
        m = {lib: statistics.median(t[(c, lib, s, pl)])
             for lib in ("base", "new", "mpi") if t[(c, lib, s, pl)]}
        print("%-10s %6d %3s %8.4f %8.4f %8.4f  %6.2f %6.2f" %
              (c, s, pl, m.get("base", 0), m["new"], m.get("mpi", 0),
               m.get("mpi", 0) / m["new"], m.get("base", 0) / m["new"]))


def variants(out, vs):
    t, wrong = read(out)
    print("wrong results:", wrong)
    print("%-14s %6s " % ("coll", "size") + " ".join("%9s" % v for v in vs) +
          "  %s/%s" % tuple(vs[:2]))
    for c, s in sorted(set((k[0], k[2]) for k in t)):
        m = {v: statistics.median(t[(c, v, s, "oop")]) for v in vs if t[(c, v, s, "oop")]}
        print("%-14s %6d " % (c, s) + " ".join("%9.4f" % m.get(v, 0) for v in vs) +
              "  %.3f" % (m[vs[0]] / m[vs[1]] if len(vs) > 1 else 1))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "two-builds":
        two_builds(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "variants":
        variants(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
