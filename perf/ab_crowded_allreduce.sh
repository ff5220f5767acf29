#!/bin/bash
# ab_crowded_allreduce.sh — issue 38's same-run comparison of two Chorus builds and Intel
# MPI (the perf twin `<coll>_impi_perf`, built with -Dintel=PREFIX) on one host: R
# interleaved rounds of BASE, NEW and Intel MPI; prints "lib round bytes us" lines (out of
# place time), for a median table (docs/PERF.md#perf-crowded-direct).
# Usage: perf/ab_crowded_allreduce.sh BASE_BUILD NEW_BUILD IMPI_PERF_DIR COLL NP "FLAGS" [R]
#   env INTEL=prefix of Intel MPI (default ~/.cache/chorus/venv-intel)
set -uo pipefail
B=$(cd "${1:?usage}" && pwd) W=$(cd "${2:?usage}" && pwd) I=${3:?usage}
shift 3
V=${INTEL:-$HOME/.cache/chorus/venv-intel}
COLL=$1 NP=$2 FLAGS=$3 R=${4:-3}
for r in $(seq $R); do
 LD_LIBRARY_PATH=$B/src $W/tools/chorusrun/chorusrun -np $NP $W/perf/${COLL}_perf $FLAGS -c 0 2>&1 | awk -v r=$r '/^ +[0-9]/{print "base",r,$1,$6}'
 $W/tools/chorusrun/chorusrun -np $NP $W/perf/${COLL}_perf $FLAGS -c 0 2>&1 | awk -v r=$r '/^ +[0-9]/{print "new",r,$1,$6}'
 env I_MPI_FABRICS=shm I_MPI_ROOT=$V PATH=$V/bin:$PATH $V/bin/mpirun -np $NP $I/${COLL}_impi_perf $FLAGS -c 0 2>&1 | awk -v r=$r '/^ +[0-9]/{print "intel",r,$1,$6}'
done
