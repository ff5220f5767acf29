#!/usr/bin/python3
"""Ring all-reduce data parallel vs parameter server (docs/TRAINER.md, "Parameter server:
measured against the ring"): samples/s and bytes per step at the busiest rank.

usage: trainer/ps_vs_ring.py [BUILD_DIR] [--ranks 3,4,6,8] [--rounds N] [--steps N]
       [--png docs/perf/ps_vs_ring.png] [--from-log FILE]
--from-log: no runs; the table and plot from the "round ..." lines of an earlier run's output.
Every configuration runs once per round, the configurations interleaved (load from other
work hits all alike); the table gives the median samples/s over the rounds. Bytes per step:
PS, as chorus-train counts them (push + pull, sent + received, headers included); ring,
the ring all-reduce's traffic per rank, 2 x 2(n-1)/n x the gradient bytes (sent +
received), computed, not measured.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

MODELS = {"mlp": 235146, "hashed": 4197066}  # parameters (chorus-train's plan)


def run(build, np_, args):
    cmd = [os.path.join(build, "tools/chorusrun/chorusrun"), "-np", str(np_), "--timeout", "600",
           os.path.join(build, "trainer/chorus-train")] + args
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=700)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    sps = float(re.search(r"samples/s (\d+)", out.stdout).group(1))
    m = re.search(r"ps traffic: (\d+) bytes/step at the busiest worker.*?, (\d+) at the busiest "
                  r"server", out.stdout)
    busiest = max(float(m.group(1)), float(m.group(2))) if m else None
    return sps, busiest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--ranks", default="3,4,6,8")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--png", default="")
    ap.add_argument("--from-log", default="")
    a = ap.parse_args()
    if a.from_log:
        a.rounds = 0
        logged = {}
        pat = re.compile(r"round \d+: (\w+) (.+) np (\d+): (\d+) samples/s, ([\d.]+) MB/step")
        for line in open(a.from_log):
            m = pat.match(line)
            if m:
                logged.setdefault((m.group(1), m.group(2), int(m.group(3))), []).append(
                    (float(m.group(4)), float(m.group(5)) * 1e6))
    common = ["--epochs", "1", "--no-eval", "--no-progress", "--max-steps", str(a.steps),
              "--batch", "64"]
    configs = []  # (model, name, ranks, flags)
    for np_ in [int(x) for x in a.ranks.split(",")]:
        configs.append(("mlp", "ring DP", np_, ["--model", "mlp"]))
        for model in ("mlp", "hashed"):
            configs.append((model, "PS sync 1 server", np_, ["--model", model, "--ps-servers", "1"]))
            configs.append((model, "PS sync 2 servers", np_, ["--model", model, "--ps-servers",
                                                              "2"]))
            configs.append((model, "PS async 1 server", np_, ["--model", model, "--ps-servers",
                                                              "1", "--ps-mode", "async"]))
    results = logged if a.from_log else {}
    for r in range(a.rounds):
        for model, name, np_, flags in configs:
            if name.startswith("PS") and "2 servers" in name and np_ < 3:
                continue
            sps, busiest = run(a.build, np_, common + flags)
            if busiest is None:  # ring: computed
                busiest = 2 * 2 * (np_ - 1) / np_ * MODELS[model] * 4
            results.setdefault((model, name, np_), []).append((sps, busiest))
            print(f"round {r + 1}: {model} {name} np {np_}: {sps:.0f} samples/s, "
                  f"{busiest / 1e6:.2f} MB/step at the busiest rank "
                  f"(load {open('/proc/loadavg').read().split()[0]})", flush=True)
    print("\n| model | scheme | ranks | samples/s (median) | MB/step at the busiest rank |")
    print("|---|---|---|---|---|")
    for (model, name, np_), v in results.items():
        print(f"| {model} | {name} | {np_} | {statistics.median(s for s, _ in v):.0f} | "
              f"{v[0][1] / 1e6:.2f}{' (computed)' if name == 'ring DP' else ''} |")
    if a.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for (model, name) in sorted({(k[0], k[1]) for k in results}):
            xs = sorted(k[2] for k in results if k[0] == model and k[1] == name)
            sps = [statistics.median(s for s, _ in results[(model, name, x)]) for x in xs]
            mb = [results[(model, name, x)][0][1] / 1e6 for x in xs]
            style = "--" if model == "hashed" else "-"
            axes[0].plot(xs, sps, style, marker="o", label=f"{model}: {name}")
            axes[1].plot(xs, mb, style, marker="o", label=f"{model}: {name}")
        axes[0].set_xlabel("ranks (servers included)")
        axes[0].set_ylabel("samples/s (2 shared cores)")
        axes[1].set_xlabel("ranks (servers included)")
        axes[1].set_ylabel("MB per step at the busiest rank")
        axes[1].set_yscale("log")
        axes[0].legend(fontsize=7)
        fig.suptitle("chorus-train: ring all-reduce DP vs parameter server")
        fig.tight_layout()
        fig.savefig(a.png, dpi=90)
        print(f"wrote {a.png}")


if __name__ == "__main__":
    main()
