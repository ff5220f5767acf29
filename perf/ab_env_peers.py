#!/usr/bin/env python3
"""ab_env_peers.py: interleaved rounds of Chorus settings and the peers, split by window.

  perf/ab_env_peers.py BUILD ROUNDS B E N COLLS 'label=VAR=V,VAR=V' ... [peers]
  perf/ab_env_peers.py build 4 4M 16M 40 all_gather,alltoall def= nt16=CHORUS_NT_THRESHOLD=16M mpi impi ccl

Per round: for every collective, every configuration (Chorus with its environment, or a
peer: mpi = Open MPI under mpirun with vader, impi / ccl = Intel MPI / oneCCL under Intel
MPI's mpirun, I_MPI_FABRICS=shm, as tools/perf-compare runs them), the order rotated each
round, each run preceded by chorus_membw --pingpong (over 300 ns: the far window). Prints
per collective, size and place (out of place, in place where the binary reports it) the
median time (us) of every configuration in each window, and the ratios to the first.
NP=N: ranks (default 2). WAIT_NEAR=S: before each round, wait up to S seconds for the
near window (probe every 2 s). Run it under the exclusive measure lock. INTEL (default ~/.cache/chorus/venv-intel).
"""
import os, re, statistics, subprocess, sys
build, rounds, b, e, n, colls = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6].split(",")
NP = os.environ.get("NP", "2")
intel = os.environ.get("INTEL", os.path.expanduser("~/.cache/chorus/venv-intel"))
cfgs = []
for a in sys.argv[7:]:
    label, _, envs = a.partition("=")
    env = {}
    for kv in filter(None, envs.split(",")):
        k, v = kv.split("=", 1); env[k] = v
    cfgs.append((label, env))
res = {}
probes = []
import time
def probe():
    o = subprocess.run([build + "/perf/chorus_membw", "--pingpong"], capture_output=True, text=True).stdout
    m = re.search(r"(\d+) ns", o)
    return int(m.group(1)) if m else 9999
for r in range(rounds):
    # NP=N: ranks (default 2). WAIT_NEAR=S: before each round, probe every 2 s for up to S seconds until the near window.
    deadline = time.time() + float(os.environ.get("WAIT_NEAR", "0"))
    while time.time() < deadline and probe() > 300:
        time.sleep(2)
    k = r % len(cfgs)
    order = cfgs[k:] + cfgs[:k]
    for coll in colls:
        for label, cenv in order:
            ns = probe()
            probes.append("%d:%s:%s:%d" % (r + 1, coll, label, ns))
            w = "far" if ns > 300 else "near"
            flags = ["-b", b, "-e", e, "-f", "2", "-n", n, "-w", str(max(2, int(n) // 10)), "-c", "1"]
            env = dict(os.environ)
            if label == "mpi":
                argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader",
                        "--mca", "pml", "ob1", "-np", NP, build + "/perf/%s_mpi_perf" % coll]
            elif label in ("impi", "ccl"):
                env.update(I_MPI_FABRICS="shm", I_MPI_ROOT=intel, PATH=intel + "/bin:" + env["PATH"])
                argv = [intel + "/bin/mpirun", "-np", NP, build + "/perf/%s_%s_perf" % (coll, label)]
            else:
                env.update(cenv)
                argv = [build + "/tools/chorusrun/chorusrun", "-np", NP, build + "/perf/%s_perf" % coll]
            p = subprocess.run(argv + flags, env=env, capture_output=True, text=True, timeout=600)
            if p.returncode:
                print("FAILED", coll, label, p.stderr[-400:]); continue
            for line in p.stdout.splitlines():
                f = line.split()
                if len(f) >= 9 and f[0].isdigit():
                    sz = int(f[0])
                    # time columns: out of place f[5], in place f[9] where present
                    res.setdefault((coll, sz, "oop", label, w), []).append(float(f[5]))
                    if len(f) >= 12:
                        res.setdefault((coll, sz, "ip", label, w), []).append(float(f[9]))
                    if len(f) >= 9 and f[8] not in ("0", "N/A"):
                        print("WRONG", coll, label, line)
print("probes (round:coll:config:ns):", " ".join(probes))
labels = [c[0] for c in cfgs]
for coll in colls:
    print("\n## %s" % coll)
    print("| size | place | window | " + " | ".join(labels) + " | " + " | ".join("%s/%s" % (l, labels[0]) for l in labels[1:]) + " |")
    keys = sorted(set((k[1], k[2], k[4]) for k in res if k[0] == coll))
    for sz, pl, w in keys:
        med = []
        for l in labels:
            v = res.get((coll, sz, pl, l, w))
            med.append(statistics.median(v) if v else float("nan"))
        cnt = len(res.get((coll, sz, pl, labels[0], w), []))
        print("| %d MiB | %s | %s (%d) | " % (sz >> 20, pl, w, cnt) + " | ".join("%.1f" % m for m in med) +
              " | " + " | ".join("%.2f" % (m / med[0]) for m in med[1:]) + " |")
