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
  mpirun_2x2      Open MPI's mpirun with the cluster's rsh agent; ranks meet through MPI;
                  the collective matrix (the 64 MiB runs are chorusrun_2x2's).
  mpirun_4x1
  slurm           a real Slurm on 3 hosts: srun -N 3 -n 6 all_reduce_perf -c 1 and an
                  sbatch script with no CHORUS_INIT, and mpirun inside salloc.
  topology_4x2    8 ranks on 4 hosts placed round-robin (-H h0:1,...,h3:1 -np 8
                  --oversubscribe: rank r on host r % 4): the ring in the GRAPH log
                  crosses each host boundary exactly once, both trees span every rank,
                  CHORUS_TOPO_DUMP_FILE writes one XML per host, and the collective matrix
                  (plus all-reduce forced onto the double binary tree) passes.
  early_exit      a rank's process dies mid-job: every other rank reports an error naming
                  a rank within 30 s, chorusrun stops with a clear message, and no process
                  of the job is left on any host.
  kill_rank       2 hosts x 2 ranks started by the test itself (no launcher to step in),
                  a 64 MiB all-reduce loop, SIGKILL rank 3: the other 3 return an error
                  within CHORUS_TIMEOUT_S + 5 s (20 + 5), none hangs, /dev/shm of every
                  host holds nothing of the job (tests/integration/lifecycle/kill_rank.py).
  loss            5% of the packets arriving on every host dropped (iptables statistic in
                  the host namespaces): 1000 random collectives (coll_stress --from-env,
                  up to 1 MiB) on 2 hosts x 2 ranks complete with correct results.
  loss_delay      200 of those collectives with 5% loss and 5 ms delay on every host's
                  incoming packets: no netem here, so the case's own tests/multinode/netdelay
                  (libnetfilter-queue) runs inside each host and holds the packets an
                  `iptables -j NFQUEUE` rule on INPUT hands it; `ping -U` (user-to-user
                  time: ping's kernel receive stamp would hide the local hold) must show a
                  round trip of >= 2 x 5 ms before the loss is turned on. Fails, not skips,
                  where netdelay was not built (libnetfilter-queue-dev missing).
  link_down       the same job, then host 1's link is taken down for good in the switch
                  namespace: every rank returns an error (CHORUS_TIMEOUT_S=20) within 30 s.
  link_down_timeout  2 hosts x 2 ranks of tests/multinode/timeout_cut, communicators made
                  with chorusConfig_t.timeoutSeconds = 3 (CHORUS_TIMEOUT_S at its 300 s
                  default): host 1's link is taken down, then each rank of host 0 sends
                  1 MiB to one of host 1 (the send returns with the message in its slots)
                  and destroys its communicator, whose tcp connection drains until the
                  deadline; host 1's ranks' receives fail. Every rank is done within 3 + 5 s
                  (the transports' deadlines are the communicator's, not 300 s).
  shrink_kill     2 hosts x 2 ranks started by the test (tests/integration/shrink): rank 3
                  (host 1) SIGKILLs itself mid all-reduce loop; the survivors fail within
                  CHORUS_TIMEOUT_S + 5 s (5 + 5), agree on {3} with chorusCommFailedRanks,
                  shrink to 3 ranks and run 100 checked rounds of every collective; then
                  rank 2 (host 1 too) dies the same way and ranks 0, 1 go on as 2 ranks.
                  Nothing left in /dev/shm on any host.
  shrink_cut      3 ranks on host 0, rank 3 alone on host 1: host 1's link is taken down
                  (the victim stays alive, cut off); the survivors fail, agree on {3}
                  (its listener does not answer within the timeout), shrink and check.
  away            2 hosts x 1 rank (tests/multinode/away_recv): after a few 8 B
                  all-reduces (whose waits read the sockets themselves), rank 1 sends
                  6 MiB to rank 0 while rank 0 makes no library call: the send must
                  complete within 20 s (rank 0's progress thread reads while its caller is
                  away), then rank 0 receives and compares every byte.
"""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration", "perf"))
import check_perf_output as cpo  # noqa: E402  (the nccl-tests format checker)
sys.path.insert(0, os.path.join(HERE, "..", "integration", "lifecycle"))
import kill_rank  # noqa: E402  (SIGKILL a rank; run_kill drives ranks on any host)
sys.path.insert(0, os.path.join(HERE, "..", "integration", "shrink"))
import shrink_test  # noqa: E402  (lose a rank, shrink, go on; run() drives ranks on any host)

CASES = {
    "chorusrun_2x2": 2, "chorusrun_4x1": 4, "mpirun_2x2": 2, "mpirun_4x1": 4,
    "slurm": 3, "early_exit": 2,
    "kill_rank": 2, "loss": 2, "loss_delay": 2, "link_down": 2, "link_down_timeout": 2,
    "topology_4x2": 4,
    "shrink_kill": 2, "shrink_cut": 2, "away": 2,
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


def main_in_cluster(script, title, name, hosts, src, inner_args, run_inner):
    """main() of a multinode script that runs its checks inside namespaced hosts: under
    --inner (in sys.argv), run_inner() on host 0, a Failure printed as FAIL with exit 1;
    otherwise, as root (exit 77 saying why if not), the script again with --inner and
    `inner_args` inside a cluster `name` of `hosts` hosts (tools/cluster run)."""
    if "--inner" in sys.argv[1:]:
        try:
            run_inner()
        except Failure as e:
            print("multinode: %s: FAIL: %s" % (title, e), flush=True)
            sys.exit(1)
        log("%s: PASS" % title)
        return
    if os.geteuid() != 0:
        print("multinode: needs root (network namespaces); not root, so not run")
        sys.exit(77)
    cmd = [os.path.join(src, "tools", "cluster"), "run", "-q", "--name", name,
           "--hosts", str(hosts), "--", sys.executable, os.path.abspath(script), "--inner"]
    sys.exit(subprocess.call(cmd + inner_args))


def main_src_build(script, title, name, hosts, run_inner):
    """main() of a multinode script whose arguments are --src SRC --build BUILD:
    main_in_cluster with them, run_inner(src, build) on host 0."""
    args = sys.argv[1:]
    src = os.path.abspath(args[args.index("--src") + 1])
    build = os.path.abspath(args[args.index("--build") + 1])
    main_in_cluster(script, title, name, hosts, src, ["--src", src, "--build", build],
                    lambda: run_inner(src, build))


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


def check_kernel(stderr, n):
    """The namespaced hosts share this machine's kernel: every rank must find all n ranks
    on one kernel (src/comm/hostid.h; their boot ids differ, their processes are visible),
    and wait in the crowded mode exactly when the kernel's CPUs are fewer than its ranks.
    Every communicator logs the line at init; the job's own has all n ranks."""
    lines = re.findall(r"rank (\d+): \d+ local ranks on \d+ cpus; this kernel runs (\d+) of the "
                       r"job's ranks on (\d+) cpus \((\d+) kernels? in the job\): waits (\w+)",
                       stderr)
    whole = sorted(int(m[0]) for m in lines if int(m[1]) == n)
    expect(sorted(set(whole)) == list(range(n)),
           "want a kernel line of all %d ranks from every rank, got ranks %s:\n%s" % (
               n, whole, stderr[-3000:]))
    for rank, runs, cpus, kernels, mode in lines:
        expect(int(kernels) == 1, "rank %s: %s kernels in the job, want 1" % (rank, kernels))
        want = "crowded" if int(runs) > int(cpus) else "spin"
        expect(mode == want, "rank %s: %s ranks on %s cpus waits %s, want %s" % (
            rank, runs, cpus, mode, want))
    full = [m for m in lines if int(m[1]) == n]
    log("every rank found one kernel running all %d ranks (%s cpus: waits %s); %d lines checked"
        % (n, full[0][2], full[0][4], len(lines)))


def check_sockets(stderr, n):
    """CHORUS_NSOCKS=auto: one tcp socket per peer and direction where the kernel runs at
    least as many ranks as it has CPUs, two otherwise; every rank with tcp peers says how
    many it opens."""
    kern = re.search(r"this kernel runs (\d+) of the job's ranks on (\d+) cpus", stderr)
    want = 1 if kern and int(kern.group(1)) >= int(kern.group(2)) else 2
    got = re.findall(r"\[(\d+)\] chorus INFO .*TCP listening on .*: (\d+) sockets per peer", stderr)
    # The job's communicator: every rank. (A split-off one of fewer ranks may not crowd.)
    ranks = sorted({int(r) for r, k in got if int(k) == want})
    expect(ranks == list(range(n)),
           "want a TCP listening line with %d socket(s) per peer from every rank (kernel line "
           "%s), got %s" % (want, kern.group(0) if kern else None, got))
    log("every rank opens %d tcp socket(s) per peer (CHORUS_NSOCKS=auto)" % want)
    # CHORUS_TCP_BUSY_POLL_US=auto: a crowded waiter reads its sockets for as long as it
    # yields (2 ms), said by rank 0; 100 us (and no line) where the ranks do not crowd.
    poll = re.findall(r"\[0\] chorus INFO .*the waiting caller reads the sockets for (\d+) us",
                      stderr)
    if want == 1:
        expect(poll and all(int(us) == 2000 for us in poll),
               "crowded: want rank 0 to read its sockets for 2000 us, got %s" % poll)
    else:
        expect(not poll, "not crowded: want the 100 us default, got %s" % poll)
    log("tcp busy poll: %s (CHORUS_TCP_BUSY_POLL_US=auto)" % (
        "2000 us" if poll else "100 us"))


def case_chorusrun(c, per_host):
    n = len(c.hosts) * per_host
    spec = ",".join("%s:%d" % (h, per_host) for h in c.hosts)
    coll = c.exe("tests/integration/coll/coll_proc_main")
    env = {"CHORUS_DEBUG": "INFO", "CHORUS_DEBUG_SUBSYS": "INIT,NET", "CHORUS_TIMEOUT_S": "120"}
    _, out, err, took = c.chorusrun(spec, ["-x", "CHORUS_DEBUG", "-x", "CHORUS_DEBUG_SUBSYS",
                                           "-x", "CHORUS_TIMEOUT_S", coll] + MATRIX_ARGS, env=env)
    expect(out.count("-> PASS") == n, "want %d PASS lines:\n%s" % (n, out[-3000:]))
    log("matrix passed on %d ranks in %.1f s" % (n, took))
    check_transports(err, [r // per_host for r in range(n)])
    check_kernel(err, n)
    check_sockets(err, n)
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
    # What mpirun changes is the launch (ranks, sizes and the rendezvous from Open MPI's
    # environment): the matrix shows it. The 64 MiB runs move the same bytes the same way
    # as under chorusrun (case_chorusrun, same shapes) and took 17 of this case's 19 s.


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


def parse_graphs(stderr):
    """The ring and trees rank 0 logs at INFO in subsystem GRAPH (from src/comm/topo_exchange.cc)."""
    ring = re.search(r"topo_exchange\.cc:\d+ ring ([\d ]+) \((\d+) hosts\)", stderr)
    expect(ring, "no 'ring ... (N hosts)' GRAPH line:\n%s" % stderr[-3000:])
    trees = {}
    for m in re.finditer(r"topo_exchange\.cc:\d+ tree (\d) root (\d+);((?: \d+:(?:-|\d+)->(?:-|[\d,]+))+)", stderr):
        links = {}
        for item in m.group(3).split():
            r, rest = item.split(":")
            parent, kids = rest.split("->")
            links[int(r)] = (-1 if parent == "-" else int(parent),
                             [] if kids == "-" else [int(k) for k in kids.split(",")])
        trees[int(m.group(1))] = (int(m.group(2)), links)
    return [int(x) for x in ring.group(1).split()], int(ring.group(2)), trees


def case_topology(c):
    hosts = len(c.hosts)
    n = 2 * hosts
    spec = ",".join("%s:1" % h for h in c.hosts)
    host_of = [r % hosts for r in range(n)]
    coll = c.exe("tests/integration/coll/coll_proc_main")
    dump_dir = c.exe("multinode-topo-%d" % os.getpid())
    os.makedirs(dump_dir, exist_ok=True)
    try:
        env = {"CHORUS_DEBUG": "INFO", "CHORUS_DEBUG_SUBSYS": "INIT,GRAPH", "CHORUS_TIMEOUT_S": "120",
               "CHORUS_TOPO_DUMP_FILE": os.path.join(dump_dir, "%h.xml")}
        _, out, err, took = c.chorusrun(spec, ["-np", str(n), "--oversubscribe",
                                               "-x", "CHORUS_DEBUG", "-x", "CHORUS_DEBUG_SUBSYS",
                                               "-x", "CHORUS_TIMEOUT_S", "-x", "CHORUS_TOPO_DUMP_FILE",
                                               coll] + MATRIX_ARGS, env=env, timeout=900)
        expect(out.count("-> PASS") == n, "want %d PASS lines:\n%s" % (n, out[-3000:]))
        log("matrix passed on %d ranks placed round-robin over %d hosts in %.1f s" % (n, hosts, took))
        check_transports(err, host_of)
        ring, nhosts, trees = parse_graphs(err)
        expect(nhosts == hosts, "GRAPH says %d hosts, want %d" % (nhosts, hosts))
        expect(sorted(ring) == list(range(n)), "ring %s is not a permutation of 0..%d" % (ring, n - 1))
        crossings = sum(host_of[ring[i]] != host_of[ring[(i + 1) % n]] for i in range(n))
        expect(crossings == hosts, "ring %s crosses host boundaries %d times, want %d (hosts %s)"
               % (ring, crossings, hosts, host_of))
        log("ring %s crosses each of the %d host boundaries once (rank order would cross %d times)"
            % (" ".join(map(str, ring)), hosts, sum(host_of[r] != host_of[(r + 1) % n] for r in range(n))))
        expect(sorted(trees) == [0, 1], "want GRAPH lines for trees 0 and 1, got %s" % sorted(trees))
        for t, (root, links) in trees.items():
            expect(sorted(links) == list(range(n)), "tree %d does not list every rank" % t)
            for r in range(n):
                x, steps = r, 0
                while x != root and steps <= n:
                    x, steps = links[x][0], steps + 1
                expect(x == root, "tree %d: rank %d does not reach the root %d" % (t, r, root))
        for r in range(n):
            expect(not (trees[0][1][r][1] and trees[1][1][r][1]),
                   "rank %d is an interior node of both trees" % r)
        log("trees: %s" % "; ".join("tree %d root %d" % (t, trees[t][0]) for t in (0, 1)))
        dumped = sorted(os.listdir(dump_dir))
        expect(dumped == sorted("%s.xml" % h for h in c.hosts),
               "CHORUS_TOPO_DUMP_FILE: want one file per host, got %s" % dumped)
        for f in dumped:
            with open(os.path.join(dump_dir, f)) as fh:
                expect("<topology" in fh.read(), "%s is not hwloc XML" % f)
        log("CHORUS_TOPO_DUMP_FILE wrote %s" % ", ".join(dumped))
    finally:
        for f in os.listdir(dump_dir):
            os.remove(os.path.join(dump_dir, f))
        os.rmdir(dump_dir)
    # All-reduce forced onto the double binary tree, across hosts.
    _, out, _, took = c.chorusrun(spec, ["-np", str(n), "--oversubscribe", "-x", "CHORUS_ALGO",
                                         "-x", "CHORUS_TIMEOUT_S", coll, "--coll", "all_reduce",
                                         "--big", "none"],
                                  env={"CHORUS_ALGO": "tree", "CHORUS_TIMEOUT_S": "120"}, timeout=600)
    expect(out.count("-> PASS") == n, "CHORUS_ALGO=tree: want %d PASS lines:\n%s" % (n, out[-3000:]))
    log("all_reduce on the double binary tree passed in %.1f s" % took)


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


def rank_prefixes(c, per_host):
    """Per rank, the command prefix that runs a program inside its host."""
    return [[c.tool, "exec", "--name", c.name, c.hosts[r // per_host], "--"]
            for r in range(len(c.hosts) * per_host)]


def shm_clean(c):
    for h in range(len(c.hosts)):
        _, out, _, _ = c.run(["ls", "-A", "/dev/shm"], host=h)
        left = [f for f in out.split() if f.startswith("chorus-")]
        expect(not left, "%s: left in /dev/shm: %s" % (c.hosts[h], left))


def case_kill_rank(c):
    try:
        took, lines, _ = kill_rank.run_kill(
            rank_prefixes(c, 2), c.exe("tests/integration/lifecycle/kill_worker"),
            "%s.1:29611" % c.subnet, 3, 20, 64 << 20, cwd=c.build)
    except kill_rank.Failure as e:
        raise Failure(str(e))
    for l in lines:
        log(l)
    log("every survivor returned an error; the last exited %.1f s after the kill (bound 25 s)"
        % took)
    time.sleep(0.5)
    left = c.leftovers() + ["%s: %d" % (c.hosts[h], pid) for h in range(len(c.hosts))
                            for pid, _ in c.pids(h, "kill_worker")]
    expect(not left, "processes left behind: %s" % left)
    shm_clean(c)
    log("no process and nothing in /dev/shm left on any host")


def netns_iptables(c, host, args):
    """iptables inside a host's own network namespace (never the root namespace's)."""
    cmd = ["ip", "netns", "exec", c.hosts[host], "iptables"] + args
    p = subprocess.run(cmd, capture_output=True, text=True)
    expect(p.returncode == 0, "%s: %s" % (" ".join(cmd), p.stderr.strip()))
    return p.stdout


STRESS = "tests/integration/coll/coll_stress"


LOSS_RULE = ["INPUT", "-i", "eth0", "-m", "statistic", "--mode", "random",
             "--probability", "0.05", "-j", "DROP"]


def case_loss(c):
    if subprocess.run(["sh", "-c", "command -v iptables"], capture_output=True).returncode:
        raise Failure("iptables is not installed (apt-get install iptables)")
    for h in range(len(c.hosts)):
        netns_iptables(c, h, ["-A"] + LOSS_RULE)
    log("dropping 5% of the packets arriving on eth0 of every host")
    stress_under_loss(c, "5% loss", 1000)


def stress_under_loss(c, what, calls):
    spec = ",".join("%s:2" % h for h in c.hosts)
    _, out, _, took = c.chorusrun(spec, ["-x", "CHORUS_TIMEOUT_S", c.exe(STRESS), "--from-env",
                                         "--calls", str(calls), "--max-bytes", "1048576"],
                                  env={"CHORUS_TIMEOUT_S": "120"}, timeout=560)
    passed = [l for l in out.splitlines() if ": PASS %d random collectives" % calls in l]
    expect(len(passed) == 4, "want 4 ranks passing %d collectives:\n%s" % (calls, out[-3000:]))
    drops = 0
    for h in range(len(c.hosts)):
        for line in netns_iptables(c, h, ["-L", "INPUT", "-v", "-n", "-x"]).splitlines():
            if "statistic" in line:
                drops += int(line.split()[0])
    expect(drops > 0, "iptables dropped no packet: the loss rule did not act")
    log("%d random collectives correct on 4 ranks in %.1f s with %s (%d packets dropped)"
        % (calls, took, what, drops))


NETDELAY = "tests/multinode/netdelay"
DELAY_MS = 5
DELAY_QUEUE = 4077  # NFQUEUE numbers are per network namespace: each host has its own


def ping_rtt(c, src, dst, count):
    """min and avg round trip in ms, user to user (-U: ping's default kernel receive
    timestamp is taken before INPUT and so would not see the hold on src's side)."""
    _, out, _, _ = c.run(["ping", "-U", "-n", "-q", "-c", str(count), "-i", "0.2", "-W", "2",
                          "%s.%d" % (c.subnet, dst + 1)], host=src, timeout=60, want=None)
    m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)", out)
    expect(m, "ping %s -> %s: no round trip times:\n%s" % (c.hosts[src], c.hosts[dst], out))
    return float(m.group(1)), float(m.group(2))


def case_loss_delay(c):
    if subprocess.run(["sh", "-c", "command -v iptables"], capture_output=True).returncode:
        raise Failure("iptables is not installed (apt-get install iptables)")
    prog = c.exe(NETDELAY)
    expect(os.access(prog, os.X_OK),
           "%s was not built: it needs libnetfilter-queue (apt-get install libnetfilter-queue-dev,"
           " or tools/deps; then reconfigure the build): without it there is no way to delay "
           "packets here (no netem)" % prog)
    base = ping_rtt(c, 1, 0, 5)
    log("round trip %s -> %s without delay: min %.3f ms, avg %.3f ms"
        % (c.hosts[1], c.hosts[0], base[0], base[1]))
    delays, rules = [], []
    try:
        for h in range(len(c.hosts)):
            cmd = [c.tool, "exec", "--name", c.name, c.hosts[h], "--", prog,
                   "--queue", str(DELAY_QUEUE), "--delay-ms", str(DELAY_MS)]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 cwd=c.build)
            delays.append(p)
            line = p.stdout.readline()  # "ready" once bound, or EOF when it failed
            expect("ready" in line, "%s on %s did not start (NFQUEUE missing from the kernel?): "
                   "%s%s" % (NETDELAY, c.hosts[h], line, p.stderr.read() if p.poll() is not None
                             or not line else ""))
        # Every IP packet arriving on eth0 (TCP, and ICMP for the ping check) waits in the
        # host's netdelay; ARP does not pass iptables.
        for h in range(len(c.hosts)):
            rule = ["INPUT", "-i", "eth0", "-j", "NFQUEUE", "--queue-num", str(DELAY_QUEUE)]
            netns_iptables(c, h, ["-A"] + rule)
            rules.append((h, rule))
        log("holding every packet arriving on eth0 of every host for %d ms (NFQUEUE %d + %s)"
            % (DELAY_MS, DELAY_QUEUE, NETDELAY))
        for src, dst in ((1, 0), (0, 1)):
            lo, avg = ping_rtt(c, src, dst, 10)
            expect(lo >= 2 * DELAY_MS * 0.95,
                   "ping %s -> %s: round trip min %.3f ms with %d ms on each receiver, want >= "
                   "%.1f ms: the delay does not act" % (c.hosts[src], c.hosts[dst], lo, DELAY_MS,
                                                        2 * DELAY_MS * 0.95))
            log("round trip %s -> %s with the delay: min %.3f ms, avg %.3f ms (2 x %d ms held)"
                % (c.hosts[src], c.hosts[dst], lo, avg, DELAY_MS))
        # The loss first: a dropped packet is not held for nothing.
        for h in range(len(c.hosts)):
            netns_iptables(c, h, ["-I", LOSS_RULE[0], "1"] + LOSS_RULE[1:])
            rules.append((h, LOSS_RULE))
        log("dropping 5% of the packets arriving on eth0 of every host")
        # 200 calls (about 25 s here): each waits out several delayed round trips, and the
        # 1000 of case 'loss' took 100 s under the delay (CI must stay under 30 minutes).
        stress_under_loss(c, "5%% loss and %d ms delay" % DELAY_MS, 200)
    finally:
        for h, rule in rules:
            subprocess.run(["ip", "netns", "exec", c.hosts[h], "iptables", "-D"] + rule,
                           capture_output=True)
        for h, p in enumerate(delays):
            if p.poll() is None:
                p.terminate()
            try:
                out, err = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            for l in (out + err).splitlines():
                if l.strip() and "ready" not in l:
                    log("%s: %s" % (c.hosts[h], l.strip()))


def wait_all_started(ranks, mark):
    """Until every rank printed `mark`; a rank that exits first, or 120 s, fails the case."""
    t0 = time.time()
    while not all(any(mark in l for l in k.lines) for k in ranks):
        for k in ranks:
            expect(k.proc.poll() is None, "rank %d exited early:\n    %s" % (k.rank, k.tail()))
        expect(time.time() - t0 < 120, "the job did not get going in 120 s")
        time.sleep(0.05)


def cut_host1_link(c):
    """Takes host 1's link down at the switch."""
    sw = c.name + "-sw"
    p = subprocess.run(["ip", "-n", sw, "link", "set", "h1", "down"], capture_output=True,
                       text=True)
    expect(p.returncode == 0, "ip -n %s link set h1 down: %s" % (sw, p.stderr))
    return sw


def wait_exits(ranks, since, limit_s):
    """Up to `limit_s` after `since`: notes each rank's exit time (exit_time stays None for a
    rank still running at the end)."""
    while time.time() - since < limit_s and any(k.proc.poll() is None for k in ranks):
        for k in ranks:
            if k.exit_time is None and k.proc.poll() is not None:
                k.exit_time = time.time()
        time.sleep(0.05)
    for k in ranks:
        if k.exit_time is None and k.proc.poll() is not None:
            k.exit_time = time.time()


def case_link_down(c):
    prefixes = rank_prefixes(c, 2)
    n = len(prefixes)
    ranks = []
    try:
        for r in range(n):
            env = dict(os.environ, CHORUS_RANK=str(r), CHORUS_WORLD_SIZE=str(n),
                       CHORUS_INIT="tcp://%s.1:29612" % c.subnet, CHORUS_TIMEOUT_S="20")
            env.pop("CHORUS_INIT_SERVED", None)
            ranks.append(kill_rank.Rank(r, prefixes[r] + [c.exe(STRESS), "--from-env", "--calls",
                                                          "100000000", "--max-bytes", "262144"],
                                        env, c.build))
        wait_all_started(ranks, "calls ok")
        sw = cut_host1_link(c)
        down = time.time()
        log("host 1's link is down (ip -n %s link set h1 down)" % sw)
        wait_exits(ranks, down, 30)
        hung = [k.rank for k in ranks if k.proc.poll() is None]
        expect(not hung, "ranks %s still running 30 s after the link went down" % hung)
        time.sleep(0.2)
        for k in ranks:
            err = [l for l in k.lines if ": ERROR " in l]
            expect(k.proc.returncode == 3 and err, "rank %d: exit %d, want 3 (an error):\n    %s"
                   % (k.rank, k.proc.returncode, k.tail()))
            log("%s [exited %.1f s after the link went down]" % (err[0][:300], k.exit_time - down))
        log("every rank returned an error; the last %.1f s after the link went down"
            % max(k.exit_time - down for k in ranks))
    finally:
        for k in ranks:
            if k.proc.poll() is None:
                k.proc.kill()
                k.proc.wait()


def case_link_down_timeout(c, timeout_s=3, slack_s=5):
    prefixes = rank_prefixes(c, 2)
    n = len(prefixes)
    marker = "/tmp/chorus-cut-%s-%d" % (c.name, os.getpid())
    if os.path.exists(marker):
        os.unlink(marker)
    ranks = []
    try:
        for r in range(n):
            # Sends copy into the slots (not from the caller's buffer), and small socket
            # buffers: a 1 MiB send returns with most of it still in the slots to drain.
            env = dict(os.environ, CHORUS_RANK=str(r), CHORUS_WORLD_SIZE=str(n),
                       CHORUS_INIT="tcp://%s.1:29614" % c.subnet, CHORUS_SOCKET_BUFSIZE="64K",
                       CHORUS_NSOCKS="1", CHORUS_TCP_SEND_FROM_USER="0")
            for k in ("CHORUS_INIT_SERVED", "CHORUS_TIMEOUT_S"):
                env.pop(k, None)
            ranks.append(kill_rank.Rank(r, prefixes[r] + [c.exe("tests/multinode/timeout_cut"),
                                                          "--timeout-s", str(timeout_s),
                                                          "--marker", marker],
                                        env, c.build))
        wait_all_started(ranks, ": ready")
        sw = cut_host1_link(c)
        open(marker, "w").close()
        down = time.time()
        log("host 1's link is down (ip -n %s link set h1 down); host 0's ranks send to "
            "host 1's" % sw)
        # Twice the bound, so a miss shows by how much (the 300 s deadlines never end here).
        wait_exits(ranks, down, 2 * (timeout_s + slack_s))
        time.sleep(0.2)
        for k in ranks:
            expect(k.exit_time is not None, "rank %d still running %d s after the link went "
                   "down:\n    %s" % (k.rank, 2 * (timeout_s + slack_s), k.tail()))
            took = k.exit_time - down
            sender = k.rank < n // 2
            want = [l for l in k.lines if (": sent " if sender else ": ERROR ") in l]
            expect(k.proc.returncode == (0 if sender else 3) and want,
                   "rank %d: exit %d, want %s:\n    %s" % (
                       k.rank, k.proc.returncode, "0 (sent)" if sender else "3 (an error)",
                       k.tail()))
            gone = [l for l in k.lines if "destroyed in" in l]
            log("%s; %s; exited %.1f s after the link went down"
                % (want[0][:300], gone[0] if gone else "no destroy line", took))
            expect(took <= timeout_s + slack_s, "rank %d exited %.1f s after the link went down, "
                   "over %d + %d s" % (k.rank, took, timeout_s, slack_s))
        log("every rank was done within %d + %d s; the last %.1f s after the link went down"
            % (timeout_s, slack_s, max(k.exit_time - down for k in ranks)))
    finally:
        for k in ranks:
            if k.proc.poll() is None:
                k.proc.kill()
                k.proc.wait()
        if os.path.exists(marker):
            os.unlink(marker)


SHRINK_WORKER = "tests/integration/shrink/shrink_worker"


def case_shrink_kill(c):
    try:
        ranks = shrink_test.run(rank_prefixes(c, 2), c.exe(SHRINK_WORKER),
                                "%s.1:29613" % c.subnet, "kill", 2, 5)
        report = shrink_test.check_kill(ranks, 2, 5)
    except shrink_test.Failure as e:
        raise Failure(str(e))
    for l in report:
        log(l)
    time.sleep(0.5)
    left = ["%s: %d" % (c.hosts[h], pid) for h in range(len(c.hosts))
            for pid, _ in c.pids(h, "shrink_worker")]
    expect(not left, "processes left behind: %s" % left)
    shm_clean(c)
    log("no process and nothing in /dev/shm left on any host")


def case_shrink_cut(c):
    one = rank_prefixes(c, 1)
    prefixes = [one[0], one[0], one[0], one[1]]  # rank 3 alone on host 1
    state = {"cut": None}

    def act(ranks):
        victim = ranks[3]
        if state["cut"] is None and any("READY-TO-CUT" in l for l in victim.lines):
            sw = cut_host1_link(c)
            state["cut"] = time.time()
            victim.lines.append("CUT-AT %.3f" % state["cut"])
            log("host 1's link is down (ip -n %s link set h1 down)" % sw)
        if state["cut"] is not None and all(k.proc.poll() is not None for k in ranks[:3]):
            if victim.proc.poll() is None:
                victim.proc.kill()  # cut off, still waiting: the test ends it

    try:
        ranks = shrink_test.run(prefixes, c.exe(SHRINK_WORKER), "%s.1:29614" % c.subnet, "cut", 1,
                                5, on_line=act)
        report = shrink_test.check_kill(ranks, 1, 5, cut=True)
    except shrink_test.Failure as e:
        raise Failure(str(e))
    for l in report:
        log(l)
    shm_clean(c)
    log("nothing in /dev/shm left on any host")


def case_away(c):
    marker = "/tmp/chorus-away-%s-%d" % (c.name, os.getpid())
    if os.path.exists(marker):
        os.unlink(marker)
    spec = ",".join("%s:1" % h for h in c.hosts)
    # The waits poll their sockets for up to 100 ms (and spin as long) before they hand
    # them to the progress thread: each 8 B all-reduce then ends with its caller holding
    # the sockets, which is the state the case is about. One socket with small kernel
    # buffers, so what the sender's slots (4 MiB) and the sockets hold is well below the
    # 6 MiB message: the send completes only if rank 0's progress thread moves the rest into
    # its own slots (4 MiB more) while rank 0's caller is away.
    env = {"CHORUS_TCP_BUSY_POLL_US": "100000", "CHORUS_SPIN_NS": "100000000",
           "CHORUS_NSOCKS": "1", "CHORUS_SOCKET_BUFSIZE": "64K", "CHORUS_BUFFSIZE": "4M",
           "CHORUS_TCP_CHUNKSIZE": "512K"}
    xs = []
    for k in env:
        xs += ["-x", k]
    try:
        _, out, err, took = c.chorusrun(
            spec, xs + [c.exe("tests/multinode/away_recv"), "--marker", marker,
                        "--bytes", str(6 << 20), "--within", "20"],
            env=env, timeout=120)
    finally:
        if os.path.exists(marker):
            os.unlink(marker)
    expect("sender finished" in out and " 0 of " in out, "unexpected output:\n%s\n%s" % (out, err))
    log("%s (%.1f s in all)" % (out.strip(), took))


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
    elif case == "kill_rank":
        case_kill_rank(c)
    elif case == "loss":
        case_loss(c)
    elif case == "loss_delay":
        case_loss_delay(c)
    elif case == "link_down":
        case_link_down(c)
    elif case == "link_down_timeout":
        case_link_down_timeout(c)
    elif case == "topology_4x2":
        case_topology(c)
    elif case == "shrink_kill":
        case_shrink_kill(c)
    elif case == "shrink_cut":
        case_shrink_cut(c)
    elif case == "away":
        case_away(c)
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
