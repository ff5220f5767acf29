#!/bin/sh
# perf/ccl/settings_scan.sh BUILD [PREFIX] — what Intel MPI's and oneCCL's settings change
# (docs/PERF.md "Intel MPI and oneCCL join the comparison"): one run per setting, one after
# another (a scan, not interleaved rounds: read it for differences of 20% and more).
#   - Intel MPI's startup report (tuning file, pinning) at np 2 and np 4;
#   - Intel MPI at np 4 (more ranks than cores here) under its waiting settings;
#   - oneCCL all_reduce np 2 under its transport and worker settings, and its own report;
#   - Open MPI at np 2 with single copy (CMA) off, against its default.
# Needs the -Dintel twins in BUILD (PREFIX: tools/deps-peers' environment). Prints
# "size:time_us ..." per run, out of place.
set -u
B=$(cd "$1" && pwd)/perf
V=${2:-${CHORUS_INTEL_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/chorus/venv-intel}}
I="env PATH=$V/bin:$PATH I_MPI_ROOT=$V I_MPI_FABRICS=shm"
row() { grep -E "^ +[0-9]" | awk '{printf "%s:%s ", $1, $6} END {print ""}'; }

echo "== Intel MPI startup (I_MPI_DEBUG=5): tuning file and pinning, np 2 and np 4"
for np in 2 4; do
  $I I_MPI_DEBUG=5 "$V/bin/mpirun" -np $np "$B/all_reduce_impi_perf" -b 8 -e 8 -n 5 -w 1 2>&1 |
    grep -E "tuning file|^\[0\] MPI startup\(\): +[0-9]+ +[0-9]+ "
done
for coll in all_reduce broadcast; do
  for e in "" I_MPI_WAIT_MODE=1 I_MPI_THREAD_YIELD=2 I_MPI_SPIN_COUNT=1 I_MPI_PIN=0; do
    printf "== Intel MPI np 4 %s %s: " $coll "${e:-(defaults)}"
    $I $e "$V/bin/mpirun" -np 4 "$B/${coll}_impi_perf" -b 512 -e 16M -f 8 -n 50 -w 5 2>&1 | row
  done
done

echo "== oneCCL's own report (CCL_LOG_LEVEL=info), np 2"
$I CCL_LOG_LEVEL=info "$V/bin/mpirun" -np 2 "$B/all_reduce_ccl_perf" -b 4K -e 4K -n 5 -w 1 2>&1 |
  grep -E "\[0\].*(CCL_WARN|CCL_WORKER|CCL_ATL_TRANSPORT|worker: )"
for e in "" CCL_ATL_TRANSPORT=ofi CCL_WORKER_AFFINITY=0,1 CCL_WORKER_WAIT=0 CCL_YIELD=sched_yield; do
  printf "== oneCCL np 2 all_reduce %s: " "${e:-(defaults)}"
  $I $e timeout 300 "$V/bin/mpirun" -np 2 "$B/all_reduce_ccl_perf" -b 512 -e 16M -f 8 -n 50 -w 5 2>&1 | row
done

M="mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca pml ob1 -np 2"
for coll in broadcast alltoall all_gather; do
  for x in "" "--mca btl_vader_single_copy_mechanism none"; do
    printf "== Open MPI np 2 %s %s: " $coll "${x:-(defaults: CMA above 4 KiB)}"
    $M $x "$B/${coll}_mpi_perf" -b 32K -e 2M -f 4 -n 300 -w 30 2>&1 | row
  done
done
