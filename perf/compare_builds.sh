#!/bin/sh
# perf/compare_builds.sh — does one build slow the host path against another? Runs
# all_reduce_perf (NP ranks, default 2, shared memory, host buffers) from two build trees, alternating
# A, B, A, B ... for ROUNDS rounds, and prints per size the best and the median time of
# each and their ratio (A/B). Used for "the CUDA build must not slow the host path":
#
#   perf/compare_builds.sh build-cuda build-host        # ROUNDS=6 by default
#
# Run it on an idle machine (it prints the load average before each run).
set -eu
A=$1
B=$2
ROUNDS=${ROUNDS:-6}
NP=${NP:-2}
OUT=$(mktemp -d /tmp/chorus-compare-builds.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for which in A B; do
    if [ $which = A ]; then dir=$A; else dir=$B; fi
    echo "round $r/$ROUNDS $dir (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    "$dir/tools/chorusrun/chorusrun" -np "$NP" "$dir/perf/all_reduce_perf" -b 8 -e 64M -f 4 \
      -n 50 -w 10 >"$OUT/$which.$r.txt"
  done
done
python3 - "$OUT" "$A" "$B" <<'PY'
import collections, glob, os, statistics, sys
out, names = sys.argv[1], {"A": sys.argv[2], "B": sys.argv[3]}
times = collections.defaultdict(lambda: collections.defaultdict(list))  # which -> size -> [us]
for f in glob.glob(os.path.join(out, "*.txt")):
    which = os.path.basename(f).split(".")[0]
    for line in open(f):
        p = line.split()
        if len(p) >= 13 and p[0].isdigit():  # out-of-place and in-place time columns
            times[which][int(p[0])].append(min(float(p[5]), float(p[9])))
print("A = %s, B = %s; times in us, best and median of %d runs each" % (
    names["A"], names["B"], len(glob.glob(os.path.join(out, "A.*.txt")))))
print("%10s %9s %9s %7s | %9s %9s %7s" % ("bytes", "A best", "B best", "A/B", "A med", "B med", "A/B"))
for s in sorted(times["A"]):
    a, b = times["A"][s], times["B"][s]
    print("%10d %9.2f %9.2f %7.3f | %9.2f %9.2f %7.3f" % (
        s, min(a), min(b), min(a) / min(b), statistics.median(a), statistics.median(b),
        statistics.median(a) / statistics.median(b)))
PY
