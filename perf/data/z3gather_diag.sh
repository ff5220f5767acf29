#!/bin/bash
# Sitting 1: diagnosis + env A/B at 256K and 2M, np 2 gather
cd /work/wt-z3gather
B=build-rel
IMPI=/root/.cache/chorus/venv-intel
pp() { $B/perf/chorus_membw --pingpong 2>&1 | tail -1; }
echo "== lscpu"; lscpu | grep -i "model name\|^CPU family\|^Model:\|L2\|L3"
echo "== probe"; pp
echo "== INFO run"
CHORUS_DEBUG=INFO CHORUS_DEBUG_SUBSYS=ALL $B/tools/chorusrun/chorusrun -np 2 $B/perf/gather_perf -b 256K -e 2M -f 8 -n 256 -w 25 2>&1 | grep -v "^$" | tail -40
echo "== impi debug"
env I_MPI_FABRICS=shm I_MPI_ROOT=$IMPI PATH=$IMPI/bin:$PATH I_MPI_DEBUG=6 $IMPI/bin/mpirun -np 2 $B/perf/gather_impi_perf -b 256K -e 2M -f 8 -n 256 -w 25 2>&1 | grep -i "gather\|adjust\|coll\|tuning\|shm\|pin\|^#\|^ *[0-9]" | head -40
for r in 1 2 3; do
  for v in def c256 c128 cma fifo impi; do
    p=$(pp)
    case $v in
      def) o=$($B/tools/chorusrun/chorusrun -np 2 $B/perf/gather_perf -b 256K -e 2M -f 8 -n 256 -w 25 2>&1);;
      c256) o=$(CHORUS_CHUNKSIZE=256K $B/tools/chorusrun/chorusrun -np 2 $B/perf/gather_perf -b 256K -e 2M -f 8 -n 256 -w 25 2>&1);;
      c128) o=$(CHORUS_CHUNKSIZE=128K $B/tools/chorusrun/chorusrun -np 2 $B/perf/gather_perf -b 256K -e 2M -f 8 -n 256 -w 25 2>&1);;
      cma) o=$(CHORUS_CMA_MAX=-1 $B/tools/chorusrun/chorusrun -np 2 $B/perf/gather_perf -b 256K -e 2M -f 8 -n 256 -w 25 2>&1);;
      fifo) o=$(CHORUS_CMA_MAX=0 $B/tools/chorusrun/chorusrun -np 2 $B/perf/gather_perf -b 256K -e 2M -f 8 -n 256 -w 25 2>&1);;
      impi) o=$(env I_MPI_FABRICS=shm I_MPI_ROOT=$IMPI PATH=$IMPI/bin:$PATH $IMPI/bin/mpirun -np 2 $B/perf/gather_impi_perf -b 256K -e 2M -f 8 -n 256 -w 25 2>&1);;
    esac
    echo "R$r $v probe[$p]"; echo "$o" | grep -E "^ *[0-9]+ " | head -5
  done
done
echo "== probe end"; pp
