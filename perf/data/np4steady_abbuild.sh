#!/bin/bash
# abbuild.sh ROUNDS coll "args" LOAD   -- main (/work/main/build-final) vs new, interleaved
R=$1; C=$2; ARGS=$3; LOAD=${4:-0}
declare -A BD=([main]=/work/main/build-final [new]=/work/wt-np4steady/build-np4steady)
uptime
pids=()
for i in $(seq $LOAD); do ( while :; do :; done ) & pids+=($!); done
trap 'for p in ${pids[@]}; do kill $p; done' EXIT
for r in $(seq $R); do
  rt=$(/work/wt-np4steady/build-np4steady/perf/chorus_membw --pingpong 2>/dev/null | grep -o "[0-9.]*" | head -1)
  vs=(main new); [ $((r%2)) = 0 ] && vs=(new main)
  for v in "${vs[@]}"; do
    B=${BD[$v]}
    $B/tools/chorusrun/chorusrun -np 4 $B/perf/${C}_perf $ARGS -c 1 2>&1 | awk -v r=$r -v v="$v" -v rt="$rt" '/^ *[0-9]/{print r, rt, "x", v, $1, $6, $10, $9+$13}'
  done
done
uptime
