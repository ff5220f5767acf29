#!/bin/bash
# inside tools/cluster run: interleaved rounds of variants. env: B, PINL, ROUNDS, OUTD, FLAGS, VARS ("name:ENV=..,ENV=.." ...)
read -r H0 H1 <<< "$CHORUS_CLUSTER_HOSTS"
CLUSTER_TOOL=${CLUSTER_TOOL:-$(cd "$(dirname "$0")/../.." && pwd)/tools/cluster}
mkdir -p $OUTD
for r in $(seq 1 $ROUNDS); do
 for v in $VARS; do
  name=${v%%:*}; envs=${v#*:}; xs=()
  for e in ${envs//,/ }; do xs+=(-x "$e"); done
  pin=()
  [ -n "$PINL" ] && pin=(-x "REPRO_COST_PIN=$PINL" sh -c 'set -f; set -- "$0" "$@"; c=$(echo $REPRO_COST_PIN | cut -d" " -f$((CHORUS_RANK + 1))); if [ -z "$c" ] || [ "$c" = - ]; then exec "$@"; fi; exec taskset -c "$c" "$@"')
  "$CLUSTER_TOOL" exec --name "$CHORUS_CLUSTER_NAME" "$H0" -- env $B/tools/chorusrun/chorusrun -H "$H0:${PPN:-2},$H1:${PPN:-2}" --launch-agent "$CHORUS_CLUSTER_AGENT_EXE" \
   "${xs[@]}" "${pin[@]}" $B/perf/${PERFB:-all_reduce_perf} $FLAGS -c 0 --csv $OUTD/$name.r$r.csv > /dev/null 2>$OUTD/$name.r$r.err || echo "FAIL $name r$r"
 done
done
