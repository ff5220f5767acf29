#!/bin/bash
# measure_tcp_crowd.sh — the input of perf/fit_tcp_crowd.py: all-reduce times of each
# algorithm forced (CHORUS_ALGO=direct, doubling, ring, tree, halving; interleaved rounds, median
# per size) on namespaced hosts that share this machine's kernel, next to the cost
# model's predictions with the crowded-tcp constants neutral (a tuning file with
# tcp_crowd_peer_us 0 and tcp_crowd_ring/halving_correction all 1, read from the TUNING table of
# CHORUS_DEBUG=INFO in the same run).
#
# Usage: perf/measure_tcp_crowd.sh BUILD_DIR >> perf/data/tcp_crowd.csv   (needs root)
#   env HOSTS=4 PPN=1   the shape (default 4 x 1); ROUNDS=5 rounds
#   env CLUSTER_NAME=tcpcrowd CLUSTER_SUBNET=10.78.0   the tools/cluster name and subnet
# Prints CSV rows (no header): shape,ranks,remote_peers,ranks_per_cpu,bytes,algo,
# measured_us,predicted_us. The cluster is always torn down.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
if [ "${1:-}" != "--inner" ]; then
  BUILD=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
  exec "$SRC/tools/cluster" run --name "${CLUSTER_NAME:-tcpcrowd}" \
    --subnet "${CLUSTER_SUBNET:-10.78.0}" --hosts "${HOSTS:-4}" --force -- "$0" --inner "$BUILD"
fi
BUILD=$2
PPN=${PPN:-1}
ROUNDS=${ROUNDS:-5}
read -r H0 _ <<< "$CHORUS_CLUSTER_HOSTS"
NH=$(wc -w <<< "$CHORUS_CLUSTER_HOSTS")
HLIST=$(for h in $CHORUS_CLUSTER_HOSTS; do printf '%s:%s,' "$h" "$PPN"; done)
HLIST=${HLIST%,}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
printf 'set tcp_crowd_peer_us 0\ntcp_crowd_ring_correction 1 1 1 1 1 1 1 1 1 1\ntcp_crowd_halving_correction 1 1 1 1 1 1 1 1 1 1\n' > "$TMP/neutral.tuning"
run() {  # run OUT ENV... -- FLAGS...
  local out=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  "$SRC/tools/cluster" exec --name "$CHORUS_CLUSTER_NAME" "$H0" -- env "${envs[@]}" \
    "$BUILD/tools/chorusrun/chorusrun" -H "$HLIST" --launch-agent "$CHORUS_CLUSTER_AGENT" \
    "$BUILD/perf/all_reduce_perf" "$@" -c 0 --csv "$out" > /dev/null
}
# The model's predictions and the kernel's crowding, from rank 0's INFO lines.
run "$TMP/info.csv" CHORUS_DEBUG=INFO CHORUS_DEBUG_SUBSYS=TUNING,INIT \
  CHORUS_TUNING_FILE="$TMP/neutral.tuning" -- -b 8 -e 8 -n 1 -w 0 2> "$TMP/info.txt"
for round in $(seq 1 "$ROUNDS"); do
  for algo in direct doubling ring tree halving; do
    echo "round $round/$ROUNDS $algo" >&2
    run "$TMP/$algo.small.$round.csv" CHORUS_ALGO=$algo -- -b 8 -e 4K -f 2 -n 200 -w 20
    case $algo in direct|doubling) continue ;; esac
    run "$TMP/$algo.large.$round.csv" CHORUS_ALGO=$algo -- -b 16K -e 16M -f 4 -n 20 -w 5
  done
done
python3 - "$TMP" "$NH" "$PPN" <<'PY'
import csv, glob, re, statistics, sys
tmp, nh, ppn = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = nh * ppn
text = open(tmp + "/info.txt").read()
m = re.search(r"\[0\].*cost model: .*?([0-9.]+) ranks per cpu of the most crowded kernel", text)
c = float(m.group(1))
cols = [8, 256, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20,
        256 << 20]
pred = {}
for line in text.splitlines():
    mm = re.search(r"\[0\].*all_reduce\s+(direct|ring|tree|doubling|halving)\s+(.*)$", line)
    if mm:
        for b, v in zip(cols, mm.group(2).split()):
            if v != "-":
                pred[mm.group(1), b] = float(v)
times = {}
for f in glob.glob(tmp + "/*.*.*.csv"):
    algo = f.split("/")[-1].split(".")[0]
    for row in csv.reader(open(f)):
        if row and row[0] != "collective" and row[8] == "out-of-place":
            times.setdefault((algo, int(row[3])), []).append(float(row[9]))
remote = n - 1 if ppn == 1 else n - ppn
for (algo, b), ts in sorted(times.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    if (algo, b) in pred:
        print("%dx%d,%d,%d,%g,%d,%s,%.2f,%.2f" % (nh, ppn, n, remote, c, b, algo,
                                               statistics.median(ts), pred[algo, b]))
PY
