#!/bin/bash
# tcp_ab.sh — two Chorus settings against each other over TCP between two namespaced hosts:
# per-call all-reduce times (perf/allreduce_latency) at a few large sizes, and the TCP
# segments both hosts retransmitted, in ABBA order so a load that drifts during the run
# hits both settings alike.
#
# Usage: perf/tcp_ab.sh BUILD_DIR ROUNDS "ENV_A" "ENV_B"     (needs root: tools/cluster)
#   ENV_x: space-separated VAR=VALUE settings for the ranks (X=1 for none), e.g.
#          perf/tcp_ab.sh build 4 CHORUS_TCP_CONGESTION=bbr CHORUS_TCP_CONGESTION=cubic
#   env SIZES="16777216:40 67108864:12"  BYTES:CALLS per size (default shown)
#   env CLUSTER_NAME=C CLUSTER_SUBNET=A.B.C  (default tcpab, 10.76.0)
# Prints, per setting and size, the median over runs of each run's median call time and
# mean call time (ms), and the median of retransmitted segments per run; then every run.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)

if [ "${1:-}" != "--inner" ]; then
  [ $# -eq 4 ] || { sed -n '7,13p' "$0" >&2; exit 2; }
  BUILD=$(cd "$1" && pwd)
  for f in tools/chorusrun/chorusrun perf/allreduce_latency; do
    [ -x "$BUILD/$f" ] || { echo "$0: missing $BUILD/$f (build it first)" >&2; exit 2; }
  done
  exec "$SRC/tools/cluster" run --name "${CLUSTER_NAME:-tcpab}" --subnet "${CLUSTER_SUBNET:-10.76.0}" \
    --hosts 2 --force -- "$0" --inner "$BUILD" "$2" "$3" "$4"
fi

BUILD=$2 ROUNDS=$3 A=$4 B=$5
read -r H0 H1 _ <<< "$CHORUS_CLUSTER_HOSTS"
on() { local h=$1; shift; "$SRC/tools/cluster" exec --name "$CHORUS_CLUSTER_NAME" "$h" -- "$@"; }
retrans() {
  local s=0 v
  for h in "$H0" "$H1"; do
    v=$(on "$h" nstat -az TcpRetransSegs | awk '/TcpRetransSegs/ {print $2}')
    s=$((s + ${v:-0}))
  done
  echo "$s"
}
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for e in "$A" "$B" "$B" "$A"; do
    xs=()
    for kv in $e; do xs+=(-x "$kv"); done
    for sc in ${SIZES:-16777216:40 67108864:12}; do
      before=$(retrans)
      line=$(on "$H0" "$BUILD/tools/chorusrun/chorusrun" -H "$H0:1,$H1:1" \
        --launch-agent "$CHORUS_CLUSTER_AGENT" "${xs[@]}" \
        "$BUILD/perf/allreduce_latency" "${sc%%:*}" "${sc##*:}" | tail -1)
      after=$(retrans)
      echo "$e|$line|$((after - before))" | tee -a "$OUT" >&2
    done
  done
done
python3 - "$OUT" <<'PY'
import collections, re, statistics, sys
runs = collections.defaultdict(list)
for l in open(sys.argv[1]):
    env, line, rt = l.rstrip("\n").split("|")
    f = dict(re.findall(r"(\w+) ([\d.]+)", line))
    runs[(env, int(f["bytes"]))].append((float(f["p50"]) / 1e3, float(f["mean"]) / 1e3, int(rt)))
print("| setting | bytes | runs | median p50 (ms) | median mean (ms) | median retransmits |")
print("|---|---:|---:|---:|---:|---:|")
for (env, b), v in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print("| %s | %d | %d | %.2f | %.2f | %d |" % (env, b, len(v), statistics.median(x[0] for x in v),
          statistics.median(x[1] for x in v), statistics.median(x[2] for x in v)))
PY
