#!/bin/bash
# usage: trace1.sh OUTPREFIX coll size iters [chorusrun args]; one traced launch
B=/work/wt-np4steady/build-np4steady
O=$1; C=$2; S=$3; IT=$4; shift 4
rt=$($B/perf/chorus_membw --pingpong 2>/dev/null | grep -o "[0-9.]* ns" | head -1)
perf record -q -a -e sched:sched_switch -e sched:sched_migrate_task -e sched:sched_wakeup -o $O.data -- \
  $B/tools/chorusrun/chorusrun -np 4 "$@" $B/perf/${C}_perf -b $S -e $S -n $IT -w $((IT/10)) -c 1 > $O.out 2>&1
echo "rt=$rt $(awk '/^ *[0-9]/{print $6, $10}' $O.out)"
perf script -i $O.data -F comm,pid,tid,cpu,time,event,trace > $O.txt 2>/dev/null
rm -f $O.data
