#!/usr/bin/env python3
"""perf/pool_rounds.py CSV... — pools the rounds.csv files of several tools/perf-rounds
sittings and prints, per window (fast: near vCPUs, slow: far; perf-rounds' own split), the
ratio best peer median / Chorus median per collective and size, with the number of Chorus
runs and the best peer (O: Open MPI, I: Intel MPI, C: oneCCL). Each sitting pairs every
Chorus run with its peers' runs in one window, so pooling sittings keeps that pairing; a
window that few rounds fell in shows a small n.

  perf/pool_rounds.py perf/data/small2_sweep_np2_*.csv
"""
import collections
import csv
import statistics
import sys

LIBS = {"Open MPI": "O", "Intel MPI": "I", "oneCCL": "C", "Gloo": "G"}


def main(paths):
    t = collections.defaultdict(list)
    for path in paths:
        for r in csv.DictReader(open(path)):
            t[(r["collective"], int(r["size"]), r["window"], r["library"])].append(
                float(r["time_us"]))
    colls = list(dict.fromkeys(k[0] for k in t))
    sizes = sorted(set(k[1] for k in t))
    for w in ("fast", "slow"):
        print("\nwindow %s: best peer / Chorus (Chorus runs, best peer)\n" % w)
        print("| collective | " + " | ".join("%d B" % s for s in sizes) + " |")
        print("|---|" + "---:|" * len(sizes))
        for c in colls:
            cells = []
            for s in sizes:
                k = (c, s, w)
                if not t.get(k + ("Chorus",)):
                    cells.append("-")
                    continue
                m = {lib: statistics.median(t[k + (lib,)]) for lib in LIBS if t.get(k + (lib,))}
                lib = min(m, key=m.get)
                chorus = statistics.median(t[k + ("Chorus",)])
                cells.append("%.2f (%d, %s)" % (m[lib] / chorus, len(t[k + ("Chorus",)]), LIBS[lib]))
            print("| %s | " % c + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
