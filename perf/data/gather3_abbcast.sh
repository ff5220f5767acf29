#!/bin/bash
# abbcast.sh BASE NEW REPS LOAD : broadcast 2M-8M, base/new alternating, LOAD busy loops beside
BASE=$1; NEW=$2; R=$3; L=${4:-0}
pids=""
for i in $(seq 1 $L); do (while :; do :; done) & pids="$pids $!"; done
one() { "$1/tools/chorusrun/chorusrun" -np 2 "$1/perf/broadcast_perf" -b 2M -e 8M -f 2 -n $2 -w $(( $2 / 10 )) -c 1 2>&1 | grep -E "^\s+[0-9]+" | awk '{printf "%s %s %s; ", $1, $6, $10}'; echo; }
for r in $(seq 1 $R); do
  pp=$($NEW/perf/chorus_membw --pingpong 2>&1 | tail -1 | grep -o '[0-9]* ns' | cut -d' ' -f1)
  if [ $((r % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for lib in $order; do
    [ $lib = base ] && B=$BASE || B=$NEW
    echo "$r $lib broadcast $pp $(one $B ${N:-300})"
  done
done
[ -n "$pids" ] && kill $pids
