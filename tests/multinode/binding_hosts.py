#!/usr/bin/env python3
"""chorusrun --bind-to on every host of a job (2 namespaced hosts; issue 36's tcp 2 x 2 cell).

Usage: binding_hosts.py --src SRC --build BUILD [--inner]

Brings up 2 namespaced hosts (tools/cluster run: always torn down, also on failure) and, from
inside host 0, launches `sh` ranks with chorusrun -H h0:N,h1:N --launch-agent (the cluster's
agent: host 1's ranks start through it, as over ssh); each rank reports its host, local rank
and the CPUs the kernel lets it run on (/proc/self/status Cpus_allowed_list). The expected
sets are worked out here, apart from chorusrun, from this process's affinity and /sys's core
topology (the namespaced hosts share this machine's CPUs, so every host has the same cores):
  auto (the default), 2 ranks per host: on every host local rank i on core i (one per core,
      host 1's too: they used to run unbound there);
  --bind-to core: the same, and with 1 rank per host that rank on core 0 of each host;
  --bind-to none: every rank on every CPU this process may use;
  auto, 1 rank per host: unbound (a lone rank has no rank of its job to collide with, and
      binding it would put every host's rank on core 0 of this one machine).
Where the machine has fewer cores than ranks per host, auto runs them unbound and core shares
the cores round robin (the expectations follow). About 5 s.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration", "chorusrun"))
from cpusets import cores, parse_list  # noqa: E402
from multinode import Cluster, expect, log, main_src_build  # noqa: E402

HOSTS = 2
REPORT = ('echo "bound $CHORUS_NODE_RANK $CHORUS_LOCAL_RANK '
          '$(grep Cpus_allowed_list /proc/self/status | cut -f2)"')


def expected(mode, per_host, local_rank):
    cs, allowed = cores(), set(os.sched_getaffinity(0))
    if mode == "none" or (mode == "auto" and (per_host == 1 or per_host > len(cs))):
        return allowed
    return cs[local_rank % len(cs)]


def launch(c, mode, per_host):
    spec = ",".join("%s:%d" % (h, per_host) for h in c.hosts)
    args = [] if mode == "auto" else ["--bind-to", mode]
    _, out, err, took = c.chorusrun(spec, args + ["sh", "-c", REPORT], timeout=60)
    got = {}
    for line in out.splitlines():
        if line.startswith("bound "):
            _, node, local, cpus = line.split(None, 3)
            got[(int(node), int(local))] = parse_list(cpus)
    want_keys = [(h, lr) for h in range(HOSTS) for lr in range(per_host)]
    expect(sorted(got) == want_keys, "--bind-to %s, %s: reports from %s, want %s:\n%s\n%s" % (
        mode, spec, sorted(got), want_keys, out[-2000:], err[-2000:]))
    for (node, local), cpus in sorted(got.items()):
        want = expected(mode, per_host, local)
        expect(cpus == want, "--bind-to %s, %s: local rank %d of host %d runs on CPUs %s, want "
               "%s (stderr: %s)" % (mode, spec, local, node, sorted(cpus), sorted(want),
                                    err[-1000:]))
    log("--bind-to %s, %s: every host's ranks on %s (%.1f s)" % (
        mode, spec, [sorted(got[(0, lr)]) for lr in range(per_host)], took))


def inner(src, build):
    c = Cluster(src, build)
    log("cores here: %s" % [sorted(s) for s in cores()])
    for mode, per_host in [("auto", 2), ("core", 2), ("none", 2), ("auto", 1), ("core", 1)]:
        launch(c, mode, per_host)


def main():
    main_src_build(__file__, "binding_hosts", "bindh%d" % (os.getpid() % 10000), HOSTS, inner)


if __name__ == "__main__":
    main()
