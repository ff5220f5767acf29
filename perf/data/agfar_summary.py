#!/usr/bin/env python3
"""Medians per size, variant and window from agfar_diag.sh output (near: probe < 300 ns)."""
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"R(\d+) (\S+) (\S+) \[(\d+) ns\] oop (\S+) ip (\S+) wrong (\S+) (\S+)", line)
    if not m:
        continue
    _, size, var, ns, oop, ip, w1, w2 = m.groups()
    if w1 != "0" or w2 != "0":
        print("WRONG:", line.strip())
    win = "near" if int(ns) < 300 else "far"
    for key in ((size, var, win), (size, var, "all")):
        rows.setdefault(key, []).append((float(oop), float(ip)))
sizes = ["4K", "256K", "2M", "16M", "128M"]
vars_ = []
for (s, v, w) in rows:
    if v not in vars_:
        vars_.append(v)
for win in ("near", "far", "all"):
    print("\n%s window: out-of-place median us (runs) / in-place median" % win)
    print("| size | " + " | ".join(vars_) + " |")
    print("|---:|" + "---:|" * len(vars_))
    for s in sizes:
        cells = []
        for v in vars_:
            r = rows.get((s, v, win))
            if not r:
                cells.append("-")
            else:
                cells.append("%.4g (%d) / %.4g" % (statistics.median(x[0] for x in r), len(r),
                                                   statistics.median(x[1] for x in r)))
        print("| %s | %s |" % (s, " | ".join(cells)))
