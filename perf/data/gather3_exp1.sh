#!/bin/bash
B=/work/wt-gather3/build-g3
V=/root/.cache/chorus/venv-intel
run() { "$@" -b 256K -e 1M -f 2 -n 5000 -w 500 -c 1 2>&1 | grep -E "^\s+[0-9]+" | awk '{print $1, $6, $10}' | tr '\n' ';'; echo; }
impi() { env PATH=$V/bin:$PATH I_MPI_ROOT=$V LD_LIBRARY_PATH=$V/lib:$V/lib/release I_MPI_FABRICS=shm $V/bin/mpirun -np 2 "$@"; }
for r in 1 2; do
echo "pingpong $($B/perf/chorus_membw --pingpong 2>&1 | tail -1 | grep -o '[0-9]* ns')"
echo -n "default: "; run $B/tools/chorusrun/chorusrun -np 2 $B/perf/gather_perf
echo -n "chunk128K: "; CHORUS_CHUNKSIZE=128K run $B/tools/chorusrun/chorusrun -np 2 $B/perf/gather_perf
echo -n "cma-always: "; CHORUS_CMA_MAX=-1 run $B/tools/chorusrun/chorusrun -np 2 $B/perf/gather_perf
echo -n "impi: "; run impi $B/perf/gather_impi_perf
done
