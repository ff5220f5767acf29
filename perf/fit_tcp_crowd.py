#!/usr/bin/env python3
"""fit_tcp_crowd.py - fits the cost model's constants for tcp hops between ranks that
share a kernel's CPUs (src/tuning/tuning.h: tcpCrowdPeerUs, tcpCrowdRingCorrection,
tcpCrowdHalvingCorrection) to
measured all-reduce times, and shows what the fitted model then picks per size.

Input (perf/data/tcp_crowd.csv, made by perf/measure_tcp_crowd.sh): one row per shape,
size and algorithm with the measured median time and the model's prediction for that
algorithm with the two constants neutral (tcp_crowd_peer_us 0, tcp_crowd_ring_correction
all 1),
as the library's CHORUS_DEBUG=INFO TUNING table printed it in the same run:

    shape,ranks,remote_peers,ranks_per_cpu,bytes,algo,measured_us,predicted_us

The fit (medians over the shapes, so one noisy point does not decide alone):
  tcp_crowd_peer_us: what the direct exchange loses to recursive doubling beyond what the
      model without it predicts, per peer over tcp and extra rank per CPU: median over
      sizes <= 4 KiB of ((measured direct - measured doubling) - (predicted direct -
      predicted doubling)) / ((c - 1) * remote peers)
  tcp_crowd_ring_correction, tcp_crowd_halving_correction (10 factors each, 16 KiB ...
      8 MiB): at each measured size, the pair of factors (on a grid from 0.25 to 8) with
      which the model's choice among ring, tree and halving is the best measured one in
      every shape at once (least worst choice/best, then least sum, then closest to 1);
      as 1 + (f - 1)(c - 1) on a kernel with c ranks per CPU. Buckets between measured
      sizes interpolated in log2(size), those beyond the last measured size take its
      value. (A median over shapes of measured/predicted ratios, the fit before, averages
      shapes that disagree: with shm inside hosts the ring pays tcp on bytes that recursive
      halving keeps inside a host.)
Then, with the fitted constants, per shape and size: the model's choice among the measured
algorithms and its measured time over the best measured (choice/best).

Usage: perf/fit_tcp_crowd.py [perf/data/tcp_crowd.csv]
"""
import csv
import math
import statistics
import sys


def human(b):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return "%g %s" % (b / div, unit)
    return "%d B" % b


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "perf/data/tcp_crowd.csv"
    rows = list(csv.DictReader(line for line in open(path) if not line.startswith("#")))
    meas, pred, info = {}, {}, {}
    for r in rows:
        key = (r["shape"], int(r["bytes"]), r["algo"])
        meas[key] = float(r["measured_us"])
        pred[key] = float(r["predicted_us"])
        info[r["shape"]] = (int(r["ranks"]), int(r["remote_peers"]), float(r["ranks_per_cpu"]))
    peer = []
    for (shape, b, algo), m in meas.items():
        _, remote, c = info[shape]
        if c <= 1:
            continue
        if algo == "direct" and b <= 4096 and (shape, b, "doubling") in meas:
            lost = (m - meas[shape, b, "doubling"]) - (pred[shape, b, "direct"] -
                                                         pred[shape, b, "doubling"])
            peer.append(lost / ((c - 1) * remote))
    peer_us = statistics.median(peer)
    print("set tcp_crowd_peer_us %.1f   # median of %d; range %.1f..%.1f" %
          (peer_us, len(peer), min(peer), max(peer)))
    # Per measured size, the factors (ring, halving) that make the model's choice best in
    # every shape at once: a grid search minimizing the worst measured choice/best over the
    # shapes, then their sum, then how far the factors are from the plain model (1, 1).
    # (The median of per-shape ratios, used before, averages shapes that disagree: with
    # shm inside hosts the ring pays tcp on the bytes halving keeps inside.)
    grid = [2 ** (k / 8.0) for k in range(-16, 25)]  # 0.25 .. 8
    c_of = {shape: info[shape][2] for shape in info}
    at = {"ring": {}, "halving": {}}
    for b in sorted({k[1] for k in meas if k[1] >= 16384}):
        shapes = [sh for sh in info if c_of[sh] > 1 and (sh, b, "tree") in meas]
        if not shapes:
            continue
        best_key, best_rh = None, (1.0, 1.0)
        for r in grid:
            for h in grid:
                worst, total = 0.0, 0.0
                for sh in shapes:
                    c = c_of[sh]
                    cands = {}
                    for algo, f in (("ring", r), ("halving", h), ("tree", 1.0)):
                        if (sh, b, algo) in meas and (sh, b, algo) in pred:
                            cands[algo] = pred[sh, b, algo] * (1 + (f - 1) * (c - 1))
                    choice = min(cands, key=cands.get)
                    bestm = min(meas[sh, b, a] for a in cands)
                    ratio = meas[sh, b, choice] / bestm
                    worst, total = max(worst, ratio), total + ratio
                key = (round(worst, 3), round(total, 3), abs(math.log(r)) + abs(math.log(h)))
                if best_key is None or key < best_key:
                    best_key, best_rh = key, (r, h)
        at["ring"][b], at["halving"][b] = best_rh
    buckets = {}
    for algo in ("ring", "halving"):
        if not at[algo]:
            buckets[algo] = [1.0] * 10
            continue
        sizes = sorted(at[algo])
        bk = []
        for i in range(10):
            b = 16384 << i
            lo = max([x for x in sizes if x <= b], default=sizes[0])
            hi = min([x for x in sizes if x >= b], default=sizes[-1])
            if lo == hi:
                bk.append(at[algo][lo])
            else:
                t = (math.log2(b) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
                bk.append(at[algo][lo] * (1 - t) + at[algo][hi] * t)
        buckets[algo] = bk
        print("tcp_crowd_%s_correction " % algo + " ".join("%.2f" % f for f in bk) +
              "   # 16 KiB ... 8 MiB")
        print("# per measured size: " + ", ".join("%s %.2f" % (human(b), at[algo][b])
                                                  for b in sizes))

    def correction(algo, b):
        f = buckets[algo]
        x = math.log2(max(b, 1)) - 14
        if x <= 0:
            return f[0]
        if x >= 9:
            return f[9]
        i = int(x)
        return f[i] * (1 - (x - i)) + f[i + 1] * (x - i)
    print()
    print("| shape | size | model's choice | measured us (choice) | best measured | choice/best |")
    print("|---|---:|---|---:|---|---:|")
    worst = 0.0
    for shape in sorted(info):
        _, remote, c = info[shape]
        for b in sorted({k[1] for k in meas if k[0] == shape}):
            cands = {}
            for algo in ("direct", "doubling", "ring", "tree", "halving"):
                if (shape, b, algo) not in pred:
                    continue
                t = pred[shape, b, algo]
                if algo == "direct":
                    t += peer_us * (c - 1) * remote
                if algo in buckets:
                    t *= 1 + (correction(algo, b) - 1) * (c - 1)
                cands[algo] = t
            choice = min(cands, key=cands.get)
            best = min((a for a in cands if (shape, b, a) in meas), key=lambda a: meas[shape, b, a])
            ratio = meas[shape, b, choice] / meas[shape, b, best]
            worst = max(worst, ratio)
            print("| %s | %s | %s | %.1f | %s %.1f | %.2f |" %
                  (shape, human(b), choice, meas[shape, b, choice], best, meas[shape, b, best], ratio))
    print()
    print("worst choice/best: %.2f" % worst)


if __name__ == "__main__":
    main()
