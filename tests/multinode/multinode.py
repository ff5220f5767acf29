#!/usr/bin/env python3
"""Multi-host tests on namespaced hosts (tools/cluster): shm inside a host, tcp between.

Usage: multinode.py CASE --src SRC --build BUILD

Each case brings up its own cluster through `tools/cluster run` (which always tears it
down, also when the case fails or is interrupted) and runs itself again inside it as
`multinode.py --inner CASE ...`; every command of the case then runs inside host 0 via
`tools/cluster exec`, the way a user would log in to a node and launch from there.

Cases:
  chorusrun_2x2   chorusrun -H h0:2,h1:2 --launch-agent: the collective matrix (every
                  collective, types, ops, in/out-of-place) plus 64 MiB float sums; the
                  INFO log must show shm between ranks of a host and tcp across hosts.
  chorusrun_4x1   the same on 4 hosts x 1 rank (every pair over tcp).
  mpirun_2x2      Open MPI's mpirun with the cluster's rsh agent; ranks meet through MPI.
  mpirun_4x1
  slurm           a real Slurm on 3 hosts: srun -N 3 -n 6 all_reduce_perf -c 1 and an
                  sbatch script with no CHORUS_INIT, and mpirun inside salloc.
  early_exit      a rank's process dies mid-job: every other rank reports an error naming
                  a rank within 30 s, chorusrun stops with a clear message, and no process
                  of the job is left on any host.
"""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration", "perf"))
import check_perf_output as cpo  # noqa: E402  (the nccl-tests format checker)

CASES = {
    "chorusrun_2x2": 2, "chorusrun_4x1": 4, "mpirun_2x2": 2, "mpirun_4x1": 4,
    "slurm": 3, "early_exit": 2,
}
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe",
          "--mca", "btl", "self,vader,tcp", "--mca", "mpi_yield_when_idle", "1"]
# Every collective with every type/op at small and mid sizes (coll_proc_main's defaults),
# then the biggest: 64 MiB buffers of float32 (the whole buffer: 16 Mi elements for the
# all-reduce family, 16 Mi / 4 per rank block for the collectives whose buffer holds one
# block per rank).
MATRIX_ARGS = ["--big", "none"]
BIG_RUNS = [
    ["--coll", "all_reduce,broadcast,reduce", "--types", "float32", "--ops", "sum",
     "--sizes", "16777216", "--mid", "none", "--big", "none"],
    ["--coll", "all_gather,reduce_scatter,all_to_all,scatter,gather", "--types", "float32",
     "--ops", "sum", "--sizes", "4194304", "--mid", "none", "--big", "none"],
]


class Failure(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise Failure(msg)


def log(msg):
    print("multinode: " + msg, flush=True)


class Cluster:
    def __init__(self, src, build):
        self.src, self.build = src, build
        self.name = os.environ["CHORUS_CLUSTER_NAME"]
        self.hosts = os.environ["CHORUS_CLUSTER_HOSTS"].split()
        self.agent = os.environ["CHORUS_CLUSTER_AGENT"]
        self.tool = os.path.join(src, "tools", "cluster")
        self.subnet = os.environ.get("CHORUS_CLUSTER_SUBNET", "10.77.0")

    def run(self, cmd, host=0, env=None, timeout=600, want=0, input_text=None):
        """Runs cmd inside a host; returns (rc, stdout, stderr, seconds)."""
        full = [self.tool, "exec", "--name", self.name, self.hosts[host], "--"] + cmd
        e = dict(os.environ)
        e.update(env or {})
        log("on %s: %s" % (self.hosts[host], " ".join(cmd)))
        t0 = time.time()
        try:
            p = subprocess.run(full, env=e, capture_output=True, text=True, timeout=timeout,
                               input=input_text, cwd=self.build)
        except subprocess.TimeoutExpired as ex:
            raise Failure("timed out after %ds: %s\n%s\n%s" % (
                timeout, " ".join(cmd), (ex.stdout or "")[-3000:], (ex.stderr or "")[-3000:]))
        took = time.time() - t0
        if want is not None and p.returncode != want:
            raise Failure("exit status %d (want %d) after %.1f s: %s\n--- stdout\n%s\n--- stderr\n%s"
                          % (p.returncode, want, took, " ".join(cmd), p.stdout[-4000:],
                             p.stderr[-4000:]))
        return p.returncode, p.stdout, p.stderr, took

    def exe(self, rel):
        return os.path.join(self.build, rel)

    def chorusrun(self, hosts_spec, args, env=None, timeout=600, want=0):
        cmd = [self.exe("tools/chorusrun/chorusrun"), "-H", hosts_spec,
               "--launch-agent", self.agent, "--timeout", str(timeout - 30)] + args
        return self.run(cmd, env=env, timeout=timeout, want=want)

    def mpirun(self, hosts_spec, np, args, timeout=600):
        cmd = MPIRUN + ["-np", str(np), "-H", hosts_spec,
                        "--mca", "plm_rsh_agent", os.path.join(self.src, "tools", "cluster-agent"),
                        "--mca", "oob_tcp_if_include", self.subnet + ".0/24",
                        "--mca", "btl_tcp_if_include", self.subnet + ".0/24",
                        "-x", "LD_LIBRARY_PATH", "-x", "CHORUS_TIMEOUT_S"] + args
        return self.run(cmd, timeout=timeout)

    def pids(self, host, pattern):
        """Pids of processes in host's network namespace whose command line contains
        pattern (ps alone would also see other jobs: the hosts share one pid namespace)."""
        p = subprocess.run(["ip", "netns", "pids", self.hosts[host]], capture_output=True,
                           text=True)
        found = []
        for pid in p.stdout.split():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if pattern in cmdline:
                found.append((int(pid), cmdline.strip()))
        return found

    def leftovers(self):
        """Processes of the job still alive on any host."""
        left = []
        for h in range(len(self.hosts)):
            for name in ("coll_proc_main", "all_reduce_perf", "peer_exit", "chorusrun"):
                left += ["%s: %d %s" % (self.hosts[h], pid, cmd) for pid, cmd in self.pids(h, name)]
        return left


def transport_pairs(stderr):
    """rank a -> rank b via T lines of CHORUS_DEBUG=INFO, as {(a, b): T}."""
    pairs = {}
    for m in re.finditer(r"rank (\d+) -> rank (\d+) via (\w+) \((same|other) host\)", stderr):
        pairs[(int(m.group(1)), int(m.group(2)))] = m.group(3)
    return pairs


def check_transports(stderr, host_of):
    pairs = transport_pairs(stderr)
    n = len(host_of)
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            want = "shm" if host_of[a] == host_of[b] else "tcp"
            expect(pairs.get((a, b)) == want,
                   "rank %d -> rank %d: transport %r, want %s (hosts %s and %s)" % (
                       a, b, pairs.get((a, b)), want, host_of[a], host_of[b]))
    log("transports as expected for %d pairs: shm within a host, tcp across" % (n * (n - 1)))


def case_chorusrun(c, per_host):
    n = len(c.hosts) * per_host
    spec = ",".join("%s:%d" % (h, per_host) for h in c.hosts)
    coll = c.exe("tests/integration/coll/coll_proc_main")
    env = {"CHORUS_DEBUG": "INFO", "CHORUS_DEBUG_SUBSYS": "INIT", "CHORUS_TIMEOUT_S": "120"}
    _, out, err, took = c.chorusrun(spec, ["-x", "CHORUS_DEBUG", "-x", "CHORUS_DEBUG_SUBSYS",
                                           "-x", "CHORUS_TIMEOUT_S", coll] + MATRIX_ARGS, env=env)
    expect(out.count("-> PASS") == n, "want %d PASS lines:\n%s" % (n, out[-3000:]))
    log("matrix passed on %d ranks in %.1f s" % (n, took))
    check_transports(err, [r // per_host for r in range(n)])
    for big in BIG_RUNS:
        _, out, _, took = c.chorusrun(spec, [coll] + big, env={"CHORUS_TIMEOUT_S": "120"})
        expect(out.count("-> PASS") == n, "64 MiB cases: want %d PASS lines:\n%s" % (n, out[-3000:]))
        log("64 MiB cases (%s) passed in %.1f s" % (big[1], took))


def case_mpirun(c, per_host):
    n = len(c.hosts) * per_host
    spec = ",".join("%s:%d" % (h, per_host) for h in c.hosts)
    coll = c.exe("tests/integration/coll/coll_proc_main")
    os.environ["CHORUS_TIMEOUT_S"] = "120"
    _, out, _, took = c.mpirun(spec, n, [coll] + MATRIX_ARGS)
    expect(out.count("-> PASS") == n, "want %d PASS lines:\n%s" % (n, out[-3000:]))
    log("matrix passed under mpirun on %d ranks in %.1f s" % (n, took))
    for big in BIG_RUNS:
        _, out, _, took = c.mpirun(spec, n, [coll] + big)
        expect(out.count("-> PASS") == n, "64 MiB cases: want %d PASS lines:\n%s" % (n, out[-3000:]))
        log("64 MiB cases (%s) under mpirun passed in %.1f s" % (big[1], took))


PERF_ARGS = ["-b", "8", "-e", "8M", "-f", "8", "-n", "3", "-w", "1", "-c", "1"]
PERF_SIZES = [8 * 8 ** i for i in range(8) if 8 * 8 ** i <= 8 << 20]


def check_perf(out, np):
    rows = cpo.check_output(out, np, True, [("float", "sum")], PERF_SIZES)
    log("all_reduce_perf on %d ranks: %d rows, #wrong 0" % (np, rows))


def case_slurm(c):
    perf = c.exe("perf/all_reduce_perf")
    env = {k: v for k, v in os.environ.items()}
    env.pop("CHORUS_INIT", None)
    env.update(CHORUS_DEBUG="INFO", CHORUS_DEBUG_SUBSYS="INIT")
    _, out, err, _ = c.run(["srun", "-N", "3", "-n", "6", perf] + PERF_ARGS, env=env, timeout=300)
    check_perf(out, 6)
    # The address came from the step's host list, not from a file only one host could see.
    want = "(from Slurm), rendezvous tcp://%s:" % c.hosts[0]
    expect(err.count(want) == 6, "want 6 ranks reporting %r:\n%s" % (want, err[-3000:]))
    log("srun: every rank met at %s<port from job and step id>" % want.split("rendezvous ")[1])
    script = c.exe("multinode-sbatch.sh")
    outfile = c.exe("multinode-sbatch.out")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n#SBATCH -N 3\n#SBATCH -n 6\n#SBATCH -o %s\n"
                "unset CHORUS_INIT\nexec srun %s %s\n" % (outfile, perf, " ".join(PERF_ARGS)))
    try:
        c.run(["sbatch", "--wait", script], env=env, timeout=300)
        with open(outfile) as f:
            text = f.read()
        expect(text.count(want) == 6, "sbatch: want 6 ranks reporting %r" % want)
        check_perf("\n".join(l for l in text.splitlines() if " chorus INFO " not in l), 6)
    finally:
        for p in (script, outfile):
            if os.path.exists(p):
                os.remove(p)
    _, out, err, _ = c.run(["salloc", "-N", "3", "-n", "6"] + MPIRUN +
                         ["--mca", "oob_tcp_if_include", c.subnet + ".0/24",
                          "--mca", "btl_tcp_if_include", c.subnet + ".0/24", perf] + PERF_ARGS,
                         env=env, timeout=300)
    check_perf(out, 6)
    expect("rendezvous" not in err, "mpirun inside salloc: ranks should meet through MPI:\n%s"
           % err[-2000:])
    log("salloc + mpirun: ranks met through MPI")


def case_early_exit(c):
    spec = ",".join("%s:2" % h for h in c.hosts)
    # 1) Through the library alone: the victim (rank 3, on host 1) exits with status 0,
    #    so the launcher has no reason to act; every survivor must see an error naming a
    #    rank within 30 s.
    _, out, err, took = c.chorusrun(spec, ["-x", "CHORUS_TIMEOUT_S",
                                           c.exe("tests/integration/lifecycle/peer_exit"),
                                           "--victim", "3", "--within", "30"],
                                    env={"CHORUS_TIMEOUT_S": "300"}, timeout=120)
    lines = [l for l in out.splitlines() if re.match(r"rank \d: .* after [\d.]+ s: .*rank", l)]
    expect(len(lines) == 3, "want 3 survivors reporting an error naming a rank:\n%s\n%s" % (out, err))
    log("library: %s" % "; ".join(lines))
    # 2) A real application: all_reduce_perf in a long sweep, and the rank on host 1 is
    #    killed. chorusrun must stop the job with a message naming the failed rank and host
    #    well within 30 s, and nothing of the job may be left on any host.
    perf = c.exe("perf/all_reduce_perf")
    cmd = [c.exe("tools/chorusrun/chorusrun"), "-H", spec, "--launch-agent", c.agent,
           "-x", "CHORUS_TIMEOUT_S", perf, "-b", "16M", "-e", "16M", "-n", "100000", "-c", "0"]
    full = [c.tool, "exec", "--name", c.name, c.hosts[0], "--"] + cmd
    e = dict(os.environ, CHORUS_TIMEOUT_S="300")
    job = subprocess.Popen(full, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, cwd=c.build)
    try:
        time.sleep(6)  # into the sweep
        if job.poll() is not None:
            raise Failure("the job ended before the kill: %s" % (job.communicate(),))
        victims = [pid for pid, cmd in c.pids(1, "all_reduce_perf") if "chorusrun" not in cmd]
        expect(victims, "no all_reduce_perf process found on %s to kill" % c.hosts[1])
        killed = time.time()
        os.kill(victims[0], 9)
        out, err = job.communicate(timeout=60)
        took = time.time() - killed
    finally:
        if job.poll() is None:
            job.kill()
    expect(job.returncode != 0, "chorusrun exited 0 after a rank was killed")
    expect(took < 30, "chorusrun took %.1f s to stop the job (limit 30 s)" % took)
    expect(re.search(r"rank \d+ .*(killed|signal|exited)", err),
           "chorusrun's message does not say which rank failed:\n%s" % err[-2000:])
    log("chorusrun stopped the job %.1f s after the kill, exit status %d: %s" % (
        took, job.returncode, [l for l in err.splitlines() if "chorusrun" in l][:2]))
    time.sleep(1)
    left = c.leftovers()
    expect(not left, "processes left behind: %s" % left)
    log("no process of the job left on any host")


def inner(case, src, build):
    c = Cluster(src, build)
    if case == "chorusrun_2x2":
        case_chorusrun(c, 2)
    elif case == "chorusrun_4x1":
        case_chorusrun(c, 1)
    elif case == "mpirun_2x2":
        case_mpirun(c, 2)
    elif case == "mpirun_4x1":
        case_mpirun(c, 1)
    elif case == "slurm":
        case_slurm(c)
    elif case == "early_exit":
        case_early_exit(c)
    log("%s: PASS" % case)


def main():
    args = sys.argv[1:]
    is_inner = "--inner" in args
    args = [a for a in args if a != "--inner"]
    case = args[0]
    src = os.path.abspath(args[args.index("--src") + 1])
    build = os.path.abspath(args[args.index("--build") + 1])
    if case not in CASES:
        sys.exit("unknown case %s (have %s)" % (case, ", ".join(CASES)))
    if is_inner:
        try:
            inner(case, src, build)
        except Failure as e:
            print("multinode: %s: FAIL: %s" % (case, e), flush=True)
            sys.exit(1)
        return
    if os.geteuid() != 0:
        print("multinode: needs root (network namespaces); not root, so not run")
        sys.exit(77)
    name = "mn" + "".join(w[0] for w in case.split("_")) + str(os.getpid() % 1000)
    cmd = [os.path.join(src, "tools", "cluster"), "run", "--name", name,
           "--hosts", str(CASES[case])] + (["--slurm"] if case == "slurm" else []) + \
          ["--", sys.executable, os.path.abspath(__file__), "--inner", case,
           "--src", src, "--build", build]
    sys.exit(subprocess.call(cmd))


if __name__ == "__main__":
    main()
