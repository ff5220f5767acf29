#!/usr/bin/python3
"""perf/data/gather4_rows.py LOG DIR... — per section of LOG (lines '== name', then the
probes of perf/data/gather4_ab.sh) and its output DIR: each variant's median out-of-place
and in-place time per size, every run's figure, and how many copy-path changes the runs
logged (docs/PERF.md#perf-gather4)."""
import collections, glob, re, statistics, sys

log = open(sys.argv[1]).read()
secs = re.split(r"^== ", log, flags=re.M)[1:]
for d, sec in zip(sys.argv[2:], secs):
    probes = [int(x) for x in re.findall(r"probe: (\d+) ns", sec)]
    res = collections.defaultdict(list)
    flips = collections.Counter()
    for f in sorted(glob.glob(d + "/*.txt")):
        v = f.split("/")[-1].split(".")[0]
        s = open(f).read()
        flips[v] += s.count("copy path now")
        s = re.sub(r"vm:\d+:\d+ \[-?\d\] chorus [^\n]*\n?", "", s)
        for l in s.splitlines():
            m = re.match(r"\s+(\d+)\s+\d+\s+float\s+none\s+\d+\s+([\d.]+)\s+\S+\s+\S+\s+\S+\s+([\d.]+)", l)
            if m:
                res[(int(m.group(1)), v)].append((float(m.group(2)), float(m.group(3))))
    print("==", sec.splitlines()[0], "probes %d-%d ns" % (min(probes), max(probes)))
    for k in sorted(res):
        a = res[k]
        print("%9d %-8s n%d oop %8.2f inpl %8.2f | oop %s | inpl %s" % (
            k[0], k[1], len(a), statistics.median(x[0] for x in a),
            statistics.median(x[1] for x in a), " ".join(str(x[0]) for x in a),
            " ".join(str(x[1]) for x in a)))
    print("copy-path changes logged:", dict(flips))
