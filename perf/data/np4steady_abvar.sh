#!/bin/bash
# abvar.sh ROUNDS coll "-b .. -e .." "VAR1" "VAR2" ...   (VAR: env assignments, "-" for none)
B=/work/wt-np4steady/build-np4steady
R=$1; C=$2; ARGS=$3; shift 3
uptime
for r in $(seq $R); do
  rt=$($B/perf/chorus_membw --pingpong 2>/dev/null | grep -o "[0-9.]* ns" | head -1)
  vs=("$@"); [ $((r%2)) = 0 ] && vs=($(printf '%s\n' "$@" | tac))
  for v in "${vs[@]}"; do
    e=""; [ "$v" != "-" ] && e="$v"
    env $e $B/tools/chorusrun/chorusrun -np 4 $B/perf/${C}_perf $ARGS -c 1 2>&1 | awk -v r=$r -v v="$v" -v rt="$rt" '/^ *[0-9]/{print r, rt, v, $1, $6, $10, $9+$13}'
  done
done
uptime
