#!/usr/bin/env python3
"""compare_single_copy.py — Chorus (unregistered, and -R 1 registered) vs Open MPI for the
collectives the same-host single copy serves, in interleaved rounds; medians per size.

Usage: perf/compare_single_copy.py BUILD_DIR [--np 2] [--rounds 5]
           [--coll all_gather,reduce_scatter,broadcast,alltoall] [--min 512] [--max 128M]
           [--no-registered] [--fifo] [--cma] [--raw DIR]

Each round runs, for every collective, Chorus, Chorus -R 1 and Open MPI (vader,self) back to
back, the order rotated every round, so all three see the same machine state (--fifo adds
Chorus with single copy off, CHORUS_SINGLE_COPY_THRESHOLD=-1; --cma adds Chorus with
process_vm_readv at every size, CHORUS_CMA_MAX=-1, which is off by default). Per size it
prints the median out-of-place time of each over the rounds, the best, and the ratio of
medians Open MPI / Chorus (> 1: Chorus is faster), as markdown on stdout. Every run checks
its results (-c 1); a run with #wrong != 0 or a failed exit stops the script.
Builds nothing: BUILD_DIR needs tools/chorusrun/chorusrun, perf/<coll>_perf and
perf/<coll>_mpi_perf (meson -Dmpi=enabled).
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def parse(out):
    """{size: out-of-place time in us} from an nccl-tests-style table; None on #wrong."""
    rows = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) < 13 or line.startswith("#"):
            continue
        try:
            size, t, wrong = int(f[0]), float(f[5]), f[8]
        except ValueError:
            continue
        if wrong not in ("0", "N/A"):
            return None
        rows[size] = t
    return rows


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    rows = parse(p.stdout)
    if p.returncode != 0 or rows is None or not rows:
        sys.stderr.write("FAILED: %s\n%s\n%s\n" % (" ".join(cmd), p.stdout[-3000:], p.stderr[-3000:]))
        sys.exit(1)
    return rows, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--coll", default="all_gather,reduce_scatter,broadcast,alltoall")
    ap.add_argument("--min", default="512")
    ap.add_argument("--max", default="128M")
    ap.add_argument("--no-registered", action="store_true")
    ap.add_argument("--fifo", action="store_true")
    ap.add_argument("--cma", action="store_true")
    ap.add_argument("--raw", default=None)
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    chorusrun = os.path.join(b, "tools/chorusrun/chorusrun")
    flags = ["-b", a.min, "-e", a.max, "-f", "4", "-n", "10", "-w", "3", "-c", "1"]
    libs = (["chorus"] + ([] if a.no_registered else ["chorus-R1"]) +
            (["chorus-fifo"] if a.fifo else []) + (["chorus-cma"] if a.cma else []) + ["mpi"])
    colls = a.coll.split(",")
    times = {(c, l): {} for c in colls for l in libs}
    if a.raw:
        os.makedirs(a.raw, exist_ok=True)
    for rnd in range(a.rounds):
        for c in colls:
            order = libs[rnd % len(libs):] + libs[:rnd % len(libs)]
            for l in order:
                if l == "mpi":
                    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(a.np),
                           "--mca", "btl", "vader,self", os.path.join(b, "perf/%s_mpi_perf" % c)]
                else:
                    cmd = [chorusrun, "-np", str(a.np), os.path.join(b, "perf/%s_perf" % c)]
                    if l == "chorus-R1":
                        flags_l = ["-R", "1"]
                    else:
                        flags_l = []
                    cmd += flags_l
                env = dict(os.environ)
                if l == "chorus-fifo":
                    env["CHORUS_SINGLE_COPY_THRESHOLD"] = "-1"
                if l == "chorus-cma":
                    env["CHORUS_CMA_MAX"] = "-1"
                rows, out = run(cmd + flags, env)
                if a.raw:
                    with open(os.path.join(a.raw, "%s.%s.r%d.txt" % (l, c, rnd)), "w") as f:
                        f.write(out)
                for s, t in rows.items():
                    times[(c, l)].setdefault(s, []).append(t)
                sys.stderr.write("round %d %s %s done\n" % (rnd + 1, c, l))
    print("CPU: %s, %d online; np %d; %d interleaved rounds; out-of-place time (us), "
          "median [best]; ratio = Open MPI median / Chorus median\n"
          % (cpu_model(), os.cpu_count(), a.np, a.rounds))
    for c in colls:
        print("### %s\n" % c)
        head = ("| size (B) | " + " | ".join(libs) + " | ratio |" +
                (" ratio -R 1 |" if "chorus-R1" in libs else "") +
                (" fifo / single copy |" if "chorus-fifo" in libs else "") +
                (" cma / default |" if "chorus-cma" in libs else ""))
        print(head)
        print("|" + "---|" * (head.count("|") - 1))
        for s in sorted(times[(c, "mpi")]):
            med = {l: statistics.median(times[(c, l)][s]) for l in libs}
            best = {l: min(times[(c, l)][s]) for l in libs}
            cells = ["%.2f [%.2f]" % (med[l], best[l]) for l in libs]
            ratio = med["mpi"] / med["chorus"] if med["chorus"] > 0 else float("inf")
            row = "| %d | %s | %.2f |" % (s, " | ".join(cells), ratio)
            if "chorus-R1" in libs:
                row += " %.2f |" % (med["mpi"] / med["chorus-R1"] if med["chorus-R1"] > 0 else 0)
            if "chorus-fifo" in libs:
                row += " %.2f |" % (med["chorus-fifo"] / med["chorus"] if med["chorus"] > 0 else 0)
            if "chorus-cma" in libs:
                row += " %.2f |" % (med["chorus-cma"] / med["chorus"] if med["chorus"] > 0 else 0)
            print(row)
        print()


if __name__ == "__main__":
    main()
