#!/usr/bin/env python3
"""np4order_summ.py FILE... — medians of np4order_ab.sh's lines per size, placement and window
(near: both probes of the round under 300 ns; far: both over; mixed: otherwise), lo / hi
(above 1: highest bit first faster), and in how many rounds hi was the faster."""
import collections
import statistics as st
import sys

d = collections.defaultdict(dict)  # (size, pl, win) -> {round-key: {v: us}}
for i, f in enumerate(sys.argv[1:]):
    sitting = 0
    for line in open(f):
        if line.startswith("## "):  # a new sitting in a combined file
            sitting += 1
        p = line.split()
        if len(p) != 8 or line.startswith("#"):
            continue
        r, p0, p1, v, size, oop, ip, wrong = p
        if wrong != "0":
            print("WRONG", f, line.strip())
        a, b = int(p0 or 0), int(p1 or 0)
        win = "near" if a < 300 and b < 300 else "far" if a >= 300 and b >= 300 else "mixed"
        for pl, t in (("oop", oop), ("ip", ip)):
            for w in (win, "all"):
                d[(int(size), pl, w)].setdefault((i, sitting, r), {})[v] = float(t)
print("%8s %3s %5s %4s %8s %8s %6s %7s" % ("bytes", "pl", "win", "n", "lo", "hi", "lo/hi", "hi won"))
for k in sorted(d, key=lambda k: (k[1] != "oop", k[0], ["near", "far", "mixed", "all"].index(k[2]))):
    rounds = [x for x in d[k].values() if len(x) == 2]
    if not rounds:
        continue
    lo = st.median(x["lo"] for x in rounds)
    hi = st.median(x["hi"] for x in rounds)
    won = sum(x["hi"] < x["lo"] for x in rounds)
    print("%8d %3s %5s %4d %8.1f %8.1f %6.3f %4d/%d" % (k[0], k[1], k[2], len(rounds), lo, hi, lo / hi, won, len(rounds)))
