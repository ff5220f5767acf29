#!/usr/bin/env python3
"""ab_table.py — the table of perf/ab_tcp.sh and perf/ab_shm.sh: per size, each variant's
median time (µs) over the rounds, with every round's figure in brackets.

Usage: perf/ab_table.py [--in-place] DIR NAME1 [NAME2 ...]
  DIR holds the perf binaries' --csv files, v<i>.<round>.csv for variant i (1-based, in
  the order of the names) and mpi.<round>.csv for Open MPI if it ran. The out-of-place
  table is printed; --in-place adds the in-place one after it.
"""
import csv
import glob
import statistics
import sys


def table(tmp, names, placement):
    t = {}
    for f in glob.glob(tmp + "/*.csv"):
        who = f.split("/")[-1].split(".")[0]
        for row in csv.reader(open(f)):
            if row and row[0] != "collective" and row[8] == placement:
                t.setdefault(who, {}).setdefault(int(row[3]), []).append(float(row[9]))
    whos = ["v%d" % (i + 1) for i in range(len(names))] + (["mpi"] if "mpi" in t else [])
    print("%10s " % "bytes" + " ".join("%26s" % w for w in whos))
    for s in sorted(t.get("v1", {})):
        cells = []
        for w in whos:
            v = t.get(w, {}).get(s, [])
            # Sub-10 us calls with three decimals: per-call costs differ in nanoseconds.
            f = "%.3f" if v and statistics.median(v) < 10 else "%.1f"
            r = "%.3f" if v and statistics.median(v) < 10 else "%.0f"
            cells.append((f + " [%s]") % (statistics.median(v), ",".join(r % x for x in v))
                         if v else "-")
        print("%10d " % s + " ".join("%26s" % c for c in cells))


def main():
    args = sys.argv[1:]
    in_place = bool(args) and args[0] == "--in-place"
    if in_place:
        args = args[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    tmp, names = args[0], args[1:]
    for i, n in enumerate(names):
        print("# v%d = %s" % (i + 1, n))
    if in_place:
        print("# out of place")
    table(tmp, names, "out-of-place")
    if in_place:
        print("# in place")
        table(tmp, names, "in-place")


if __name__ == "__main__":
    main()
