#!/bin/bash
# args: tag PINL
cd /work/wt-z3repro
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) PIN='$2'"
/work/main/build-final/perf/chorus_membw --pingpong 2>&1 | tail -2
R=1; X=CHORUS_REPRODUCIBLE=1,CHORUS_Z3R_SCHED
env B=$PWD/build-rel PINL="$2" ROUNDS=${ROUNDS:-5} OUTD=/tmp/z3r/$1 FLAGS="${FLAGS:--b 32K -e 1M -f 2 -n 200 -w 20}" \
 VARS="${VARS:-d:CHORUS_REPRODUCIBLE=0 m:CHORUS_REPRODUCIBLE=1 swap:$X=swap ch2:$X=chain ch4:$X=chain,CHORUS_Z3R_DIV=4 ch8:$X=chain,CHORUS_Z3R_DIV=8 r1:$X=rails r2:$X=rails,CHORUS_Z3R_DIV=2 r4:$X=rails,CHORUS_Z3R_DIV=4}" \
 tools/cluster run -q --name z3r --subnet 10.94.31 --hosts 2 --force -- /tmp/z3r/var.sh
/work/main/build-final/perf/chorus_membw --pingpong 2>&1 | tail -2
echo "== end $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 /tmp/z3r/vtab.py /tmp/z3r/$1 d m swap ch2 ch4 ch8 r1 r2 r4
