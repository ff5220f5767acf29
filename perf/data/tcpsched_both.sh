#!/bin/bash
# tcpsched_both.sh — the whole measurement of branch tcpsched under one exclusive lock:
# tcp 2 x 2, main (BASE) and this branch in the same interleaved rounds, each host's ranks
# on one CPU (PIN="0 0 1 1"), then unpinned (chorusrun binds 0 1 0 1); then one launch per
# placement with CHORUS_DEBUG=INFO showing which schedules the chooser took.
#   flock -x -w 3000 /work/measure.lock perf/data/tcpsched_both.sh BUILD BASE OUTDIR
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$1 BASE=$2 OUT=$3
ROUNDS=${ROUNDS:-7} "$HERE/tcpsched_sit.sh" "$BUILD" "$BASE" "0 0 1 1" "$OUT/tcpsched_pinned.txt"
ROUNDS=${ROUNDS2:-5} "$HERE/tcpsched_sit.sh" "$BUILD" "$BASE" "" "$OUT/tcpsched_unpinned.txt"
cat > /tmp/tcpsched_info.sh <<'EOS'
read -r H0 H1 <<< "$CHORUS_CLUSTER_HOSTS"
for pl in "0 0 1 1" ""; do
  pin=()
  [ -n "$pl" ] && pin=(-x "REPRO_COST_PIN=$pl" sh -c 'set -f; set -- "$0" "$@"; c=$(echo $REPRO_COST_PIN | cut -d" " -f$((CHORUS_RANK + 1))); exec taskset -c "$c" "$@"')
  echo "== placement '${pl:-unpinned}'"
  "$TOOL" exec --name "$CHORUS_CLUSTER_NAME" "$H0" -- env "$B/tools/chorusrun/chorusrun" -H "$H0:2,$H1:2" \
    --launch-agent "$CHORUS_CLUSTER_AGENT_EXE" -x CHORUS_REPRODUCIBLE=1 -x CHORUS_DEBUG=INFO \
    -x CHORUS_DEBUG_SUBSYS=TUNING "${pin[@]}" "$B/perf/all_reduce_perf" -b 32K -e 1M -f 2 -n 400 -w 40 -c 0 2>&1 |
    grep -E '\[0\].*schedule|^ +[0-9]+ ' | sed 's/^.*chorus INFO ordered.cc:[0-9]* //'
done
EOS
env B="$BUILD" TOOL="$HERE/../../tools/cluster" "$HERE/../../tools/cluster" run -q --name tcpsched \
  --subnet 10.93.57 --hosts 2 --force -- bash /tmp/tcpsched_info.sh 2>&1 | tee "$OUT/tcpsched_choices.txt"
