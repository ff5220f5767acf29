#!/bin/bash
# abbind.sh ROUNDS coll "args" LOAD -- new build, unbound vs chorusrun --bind-to core, interleaved
R=$1; C=$2; ARGS=$3; LOAD=${4:-0}
B=/work/wt-np4steady/build-np4steady
uptime
pids=()
for i in $(seq $LOAD); do ( while :; do :; done ) & pids+=($!); done
trap 'for p in ${pids[@]}; do kill $p; done' EXIT
for r in $(seq $R); do
  rt=$($B/perf/chorus_membw --pingpong 2>/dev/null | grep -o "[0-9.]*" | head -1)
  vs=(unbound bound); [ $((r%2)) = 0 ] && vs=(bound unbound)
  for v in "${vs[@]}"; do
    a=""; [ $v = bound ] && a="--bind-to core"
    $B/tools/chorusrun/chorusrun -np 4 $a $B/perf/${C}_perf $ARGS -c 1 2>&1 | awk -v r=$r -v v="$v" -v rt="$rt" '/^ *[0-9]/{print r, rt, "x", v, $1, $6, $10, $9+$13}'
  done
done
uptime
