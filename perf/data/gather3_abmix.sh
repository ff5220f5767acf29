#!/bin/bash
# abmix.sh BASE NEW REPS : per rep, the pingpong probe, then base/new alternating (order flips
# each rep): gather 256K-1M and broadcast 2M-8M; prints "rep lib coll pingpong size oop ip; ..."
BASE=$1; NEW=$2; R=$3
one() { "$1/tools/chorusrun/chorusrun" -np 2 "$1/perf/${2}_perf" -b $3 -e $4 -f 2 -n $5 -w $(( $5 / 10 )) -c 1 2>&1 | grep -E "^\s+[0-9]+" | awk '{printf "%s %s %s; ", $1, $6, $10}'; echo; }
for r in $(seq 1 $R); do
  pp=$($NEW/perf/chorus_membw --pingpong 2>&1 | tail -1 | grep -o '[0-9]* ns' | cut -d' ' -f1)
  if [ $((r % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for lib in $order; do
    [ $lib = base ] && B=$BASE || B=$NEW
    echo "$r $lib gather $pp $(one $B gather 256K 1M 3000)"
    echo "$r $lib broadcast $pp $(one $B broadcast 2M 8M 300)"
  done
done
