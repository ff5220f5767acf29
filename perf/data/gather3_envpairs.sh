#!/bin/bash
# envpairs.sh BUILD COLL B E N REPS ENV_A ENV_B : alternating runs of one build under two envs
BLD=$1; C=$2; B=$3; E=$4; N=$5; R=$6; EA=$7; EB=$8
one() { env $1 "$BLD/tools/chorusrun/chorusrun" -np 2 "$BLD/perf/${C}_perf" -b $B -e $E -f 2 -n $N -w $((N/10)) -c 1 2>&1 | grep -E "^\s+[0-9]+" | awk '{printf "%s %s %s; ", $1, $6, $10}'; echo; }
for r in $(seq 1 $R); do
  pp=$($BLD/perf/chorus_membw --pingpong 2>&1 | tail -1 | grep -o '[0-9]* ns' | cut -d' ' -f1)
  if [ $((r % 2)) = 1 ]; then echo "A $pp $(one "$EA")"; echo "B $pp $(one "$EB")"; else echo "B $pp $(one "$EB")"; echo "A $pp $(one "$EA")"; fi
done
