#!/bin/bash
# per-call context switches and tcp segments, 64 KiB all-reduce, 2 x 2, PIN 0 0 1 1
read -r H0 H1 <<< "$CHORUS_CLUSTER_HOSTS"
C=/work/wt-r36cell/tools/cluster
N=4000
segs() { $C exec --name "$CHORUS_CLUSTER_NAME" $1 -- awk '/^Tcp:/ {n++; if (n==2) print $11, $12}' /proc/net/snmp; }
for B in /work/main/build-final /work/wt-r36cell/build-r36cell; do
for mode in 0 1; do
echo "== $B CHORUS_REPRODUCIBLE=$mode -n $N"
s0=$(segs $H0); s1=$(segs $H1)
$C exec --name "$CHORUS_CLUSTER_NAME" "$H0" -- $B/tools/chorusrun/chorusrun -H "$H0:2,$H1:2" --launch-agent "$CHORUS_CLUSTER_AGENT_EXE" -x CHORUS_REPRODUCIBLE=$mode -x "REPRO_PIN=0 0 1 1" sh -c 'set -f; c=$(echo $REPRO_PIN | cut -d" " -f$((CHORUS_RANK + 1))); exec /usr/bin/time -f "rank $CHORUS_RANK voluntary %w involuntary %c wall %e" taskset -c "$c" "$@"' sh $B/perf/all_reduce_perf -b 64K -e 64K -n $N -w 100 -c 0 2>&1 | grep -E "rank [0-9] vol|^ +65536"
echo "h0 InSegs OutSegs before $s0 after $(segs $H0); h1 before $s1 after $(segs $H1)"
done; done
