#!/usr/bin/env python3
"""perf/coll_latency (np 2 and 3) and coll_latency_mpi where built (np 2): every collective
it times prints its percentiles in order and a checked call with 0 wrong elements; with
CHORUS_PERF_INJECT_ERROR=1 the check reports the spoiled element and the run fails.

Usage: check_coll_latency.py CHORUSRUN COLL_LATENCY [COLL_LATENCY_MPI]
"""
import os
import re
import shutil
import subprocess
import sys

LINE = re.compile(r"^(chorus|mpi) (\w+) (\d+) B, (\d+) calls \(us\): min ([\d.]+) p5 ([\d.]+) "
                  r"p25 ([\d.]+) p50 ([\d.]+) p90 ([\d.]+) p99 ([\d.]+) max ([\d.]+) mean "
                  r"([\d.]+)$", re.M)


def run(argv, inject=False):
    env = dict(os.environ)
    env.pop("CHORUS_PERF_INJECT_ERROR", None)
    if inject:
        env["CHORUS_PERF_INJECT_ERROR"] = "1"
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


def check(launch, lib, coll, np):
    p = run(launch(np) + [coll, str(12 * 4 * np), "50"])
    assert p.returncode == 0, (lib, coll, np, p.stdout, p.stderr)
    m = LINE.search(p.stdout)
    assert m, (lib, coll, np, p.stdout)
    assert m.group(1) == lib and m.group(2) == coll and m.group(4) == "50", p.stdout
    q = [float(x) for x in m.groups()[4:11]]
    assert q == sorted(q) and q[0] > 0, (lib, coll, p.stdout)  # min <= p5 <= ... <= max
    assert "\nwrong 0" in "\n" + p.stdout, (lib, coll, np, p.stdout)
    bad = run(launch(np) + [coll, str(12 * 4 * np), "5"], inject=True)
    assert bad.returncode != 0 and "wrong 1" in bad.stdout, (lib, coll, np, bad.stdout,
                                                             bad.stderr)


def main():
    chorusrun, lat = sys.argv[1], sys.argv[2]
    launchers = {"chorus": lambda np: [chorusrun, "-np", str(np), lat]}
    mpirun = shutil.which("mpirun")
    if len(sys.argv) > 3 and mpirun:
        launchers["mpi"] = lambda np: [mpirun, "--allow-run-as-root", "--oversubscribe",
                                       "-x", "CHORUS_PERF_INJECT_ERROR", "--mca", "btl",
                                       "self,vader", "--mca", "pml", "ob1", "-np", str(np),
                                       sys.argv[3]]
    for lib, launch in launchers.items():
        for coll in ("all_gather", "alltoall", "reduce_scatter", "broadcast"):
            for np in ((2, 3) if lib == "chorus" else (2,)):  # mpirun starts slowly
                check(launch, lib, coll, np)
    print("coll_latency: %s, 4 collectives, np 2 and 3: checked, and the check can fail" %
          " and ".join(launchers))


if __name__ == "__main__":
    main()
