#!/bin/bash
# One launch per placement per round: broadcast np 4 at 32 KiB, out of place and in place.
B=/work/main/build-final
for round in 1 2 3; do
  for pl in "0 0 1 1" "0 1 0 1" "0 1 1 0" "none"; do
    if [ "$pl" = none ]; then
      out=$($B/tools/chorusrun/chorusrun -np 4 $B/perf/broadcast_perf -b 32K -e 32K -n 16384 -w 1638 2>&1)
    else
      out=$(PL="$pl" $B/tools/chorusrun/chorusrun -np 4 sh -c 'set -- $PL; shift $CHORUS_RANK; exec taskset -c $1 '$B'/perf/broadcast_perf -b 32K -e 32K -n 16384 -w 1638' 2>&1)
    fi
    echo "round $round placement [$pl]: $(echo "$out" | awk '$1 ~ /^[0-9]+$/ && $1==32768 {print "oop", $6, "ip", $10}')"
  done
  $B/perf/chorus_membw --pingpong 2>/dev/null | tail -1
done
