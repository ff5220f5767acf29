#!/bin/bash
# perf/data/gather4_ab.sh (docs/PERF.md#perf-gather4): VARS from base (main build), new (NB), newlong (build-g4b: + the 1023-call lease, not kept), noswap (main, CHORUS_SINGLE_COPY_THRESHOLD=1G), fifo (main, CHORUS_CMA_MAX=0), newtemp, impi; LOAD=K busy loops beside
# gather np 2: main's build / this branch / main with FIFO only / main without swaps / Intel MPI, interleaved rounds
cd /work/wt-gather4
B=/work/main/build-final; NB=${NB:-build-g4b}; V=/root/.cache/chorus/venv-intel; R=${R:-5}; OUTD=${OUTD:-/tmp/g4/ab3}
SZ=${SZ:-"-b 256K -e 1M -f 2"}; N=${N:-4000}; W=${W:-400}; LOAD=${LOAD:-0}
mkdir -p $OUTD
uptime; ls -la --time-style=full-iso $B/src/libchorus.so.0.1.0 $NB/src/libchorus.so.0.1.0
pids=""
for i in $(seq 1 $LOAD); do (while :; do :; done) & pids="$pids $!"; done
for r in $(seq 1 $R); do
  for v in ${VARS:-base new fifo noswap impi}; do
    echo "round $r $v probe: $($NB/perf/chorus_membw --pingpong 2>&1 | tail -1 | grep -o '[0-9]* ns')"
    case $v in
      base) env CHORUS_DEBUG=INFO $B/tools/chorusrun/chorusrun -np 2 $B/perf/gather_perf $SZ -n $N -w $W -c 1 ;;
      new) env CHORUS_DEBUG=INFO $NB/tools/chorusrun/chorusrun -np 2 $NB/perf/gather_perf $SZ -n $N -w $W -c 1 ;;
      newlong) env CHORUS_DEBUG=INFO build-g4b/tools/chorusrun/chorusrun -np 2 build-g4b/perf/gather_perf $SZ -n $N -w $W -c 1 ;;
      fifo) env CHORUS_DEBUG=INFO CHORUS_CMA_MAX=0 $B/tools/chorusrun/chorusrun -np 2 $B/perf/gather_perf $SZ -n $N -w $W -c 1 ;;
      noswap) env CHORUS_DEBUG=INFO CHORUS_SINGLE_COPY_THRESHOLD=1G $B/tools/chorusrun/chorusrun -np 2 $B/perf/gather_perf $SZ -n $N -w $W -c 1 ;;
      impi) env PATH=$V/bin:$PATH I_MPI_ROOT=$V LD_LIBRARY_PATH=$V/lib:$V/lib/release I_MPI_FABRICS=shm $V/bin/mpirun -np 2 $NB/perf/gather_impi_perf $SZ -n $N -w $W -c 1 ;;
    esac > $OUTD/$v.$r.txt 2>&1
  done
done
[ -n "$pids" ] && kill $pids
echo "end probe: $($NB/perf/chorus_membw --pingpong 2>&1 | tail -1 | grep -o '[0-9]* ns')"
uptime
