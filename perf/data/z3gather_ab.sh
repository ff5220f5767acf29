#!/bin/bash
# Sitting 2: main (build-final) vs new (build-rel), interleaved, plus INFO log of new
cd /work/wt-z3gather
IMPI=/root/.cache/chorus/venv-intel
pp() { build-rel/perf/chorus_membw --pingpong 2>&1 | tail -1; }
echo "== INFO new"; pp
CHORUS_DEBUG=INFO CHORUS_DEBUG_SUBSYS=TUNING,INIT build-rel/tools/chorusrun/chorusrun -np 2 build-rel/perf/gather_perf -b 256K -e 2M -f 8 -n 256 -w 25 2>&1 | grep -i "copy path\|kernel\|cma\|^ *[0-9]" | cut -c1-300
for r in 1 2 3 4; do
  for v in main new impi; do
    p=$(pp)
    case $v in
      main) o=$(/work/main/build-final/tools/chorusrun/chorusrun -np 2 /work/main/build-final/perf/gather_perf -b 256K -e 2M -f 8 -n 256 -w 25 2>&1);;
      new) o=$(build-rel/tools/chorusrun/chorusrun -np 2 build-rel/perf/gather_perf -b 256K -e 2M -f 8 -n 256 -w 25 2>&1);;
      impi) o=$(env I_MPI_FABRICS=shm I_MPI_ROOT=$IMPI PATH=$IMPI/bin:$PATH $IMPI/bin/mpirun -np 2 build-rel/perf/gather_impi_perf -b 256K -e 2M -f 8 -n 256 -w 25 2>&1);;
    esac
    echo "R$r $v probe[$p]"; echo "$o" | grep -E "^ *[0-9]+ " | head -5
  done
done
echo "== probe end"; pp
