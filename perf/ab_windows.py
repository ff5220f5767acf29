#!/usr/bin/env python3
"""ab_windows.py: interleaved A/B of all_reduce_perf across builds and settings, split by window.

  perf/ab_windows.py ROUNDS MINBYTES MAXBYTES ITERS 'label=BUILD[:VAR=V,VAR=V]' ...
  perf/ab_windows.py 4 256K 32M 100 base=/tmp/base auto=build temp=build:CHORUS_SLOT_STORES=temporal

Runs `chorusrun -np $NP BUILD/perf/all_reduce_perf -b MIN -e MAX -f 2 -n ITERS -c 0` for every
configuration in turn, the order reversed every other round, and before each run
`chorus_membw --pingpong` (the vCPUs' cache-line round trip: above 300 ns is the "slow
window" of docs/PERF.md, where the host placed the two vCPUs on different dies). Prints per
size the median out-of-place time (us) and busbw (GB/s, np 2) of each configuration over
the runs of each window separately, the ratios to the first configuration, and every run's
time ("s": slow window). NP (default 2), INPLACE=1 (in-place times) and COLL (the perf binary's
collective, default all_reduce: all_gather, alltoall, broadcast, ...) from the environment.
A configuration 'label=mpi' runs Open MPI instead (the first configuration's
perf/COLL_mpi_perf under mpirun, btl self,vader, as tools/perf-compare runs it), so
ratios against Open MPI come from the same minutes and windows. CHECK=0 runs the perf binaries
with -c 0 (the default before was -c 0: the send buffers are then never written, and at large
sizes their reads may all come from the kernel's zero page, which flatters every configuration
alike; all-to-all 16 MiB: 0.80 ms with -c 0 against 1.23 ms with -c 1); the default is -c 1.
"""
import os, subprocess, sys, statistics, re
rounds, b, e, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
np_ = os.environ.get("NP", "2")
inplace = os.environ.get("INPLACE", "0") == "1"
coll = os.environ.get("COLL", "all_reduce")
check = os.environ.get("CHECK", "1")
cfgs = []
for a in sys.argv[5:]:
    label, rest = a.split("=", 1)
    build, _, envs = rest.partition(":")
    env = dict(os.environ)
    for kv in filter(None, envs.split(",")):
        k, v = kv.split("=", 1); env[k] = v
    cfgs.append((label, build, env))
res = {c[0]: {} for c in cfgs}
pp = []
for r in range(rounds):
    order = cfgs if r % 2 == 0 else cfgs[::-1]
    for label, build, env in order:
        o = subprocess.run([os.path.join(cfgs[0][1], "perf", "chorus_membw"), "--pingpong"], capture_output=True, text=True).stdout
        m = re.search(r"(\d+) ns", o); ns = int(m.group(1)) if m else 9999
        pp.append("%s:%d" % (label, ns))
        slow = ns > 300
        flags = ["-b", b, "-e", e, "-f", "2", "-n", n, "-w", str(max(2, int(n) // 10)), "-c", check]
        if build == "mpi":
            argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader",
                    "--mca", "pml", "ob1", "-np", np_,
                    cfgs[0][1] + "/perf/%s_mpi_perf" % coll] + flags
        else:
            argv = [build + "/tools/chorusrun/chorusrun", "-np", np_,
                    build + "/perf/%s_perf" % coll] + flags
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 12 and f[0].isdigit():
                t = float(f[9] if inplace else f[5])
                res[label].setdefault(int(f[0]), []).append((t, slow))
print("pingpong ns per run:", " ".join(pp))
WANT_SLOW = False
def fast(l):
    f = [t for t, sl in l if sl == WANT_SLOW]
    return f if f else [float("nan")]
for WANT_SLOW in (False, True):
    print("## slow window (>300 ns)" if WANT_SLOW else "## fast window")
    sizes = sorted(next(iter(res.values())).keys())
    hdr = "| size | " + " | ".join("%s med us (busbw)" % c[0] for c in cfgs) + " | " + " | ".join("%s/%s" % (c[0], cfgs[0][0]) for c in cfgs[1:]) + " |"
    print(hdr)
    for s in sizes:
        meds = [(lambda v: statistics.median(v))(fast(res[c[0]][s])) for c in cfgs]
        cells = ["%.1f (%.1f)" % (m, s / m / 1e3) for m in meds]
        rat = ["%.2f" % (meds[0] / m) for m in meds[1:]]
        print("| %d KiB | " % (s >> 10) + " | ".join(cells) + " | " + " | ".join(rat) + " |")
for c in cfgs:
    print(c[0], {s >> 10: ["%.0f%s" % (x, "s" if sl else "") for x, sl in res[c[0]][s]] for s in sizes})
