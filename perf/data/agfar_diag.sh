#!/bin/bash
# agfar sittings: all-gather np 2 at 4K-128M on this Zen 3 guest, per window: each copy path
# forced (sitting 1), main vs branch vs Open MPI / Intel MPI (sitting 2: VARS="main auto mpi
# impi" ROUNDS=5; main = /work/main/build-final, auto = this branch's build-rel). The
# order of the variants rotates each round (sitting 1 ran a fixed order). Run under
# flock -x /work/measure.lock.
cd /work/wt-agfar
B=${B:-build-rel}
R=${ROUNDS:-3}
VARS=${VARS:-"auto fifo cma cells0 c2m c128k mpi"}
SIZES=${SIZES:-"4K 256K 2M 16M 128M"}
IMPI=/root/.cache/chorus/venv-intel
pp() { $B/perf/chorus_membw --pingpong 2>&1 | tail -1 | grep -o '[0-9]* ns'; }
iters() { case $1 in 4K) echo "-n 20000 -w 2000";; 256K) echo "-n 2048 -w 200";; 2M) echo "-n 256 -w 25";; 16M) echo "-n 32 -w 5";; 128M) echo "-n 20 -w 5";; esac; }
echo "== lscpu"; lscpu | grep -i "model name\|^CPU family\|^Model:"
echo "== INFO run (auto) probe $(pp)"
CHORUS_DEBUG=INFO CHORUS_DEBUG_SUBSYS=TUNING,INIT $B/tools/chorusrun/chorusrun -np 2 $B/perf/all_gather_perf -b 256K -e 128M -f 8 -n 64 -w 8 2>&1 | grep -i "copy path\|kernel\|probe\|all_gather of [0-9]* B\|^ *[0-9][0-9]* " | grep -v "B (and up to [0-9]* B) on 2 ranks: direct/LL" | cut -c1-330
echo "== INFO end probe $(pp)"
for r in $(seq 1 $R); do
  for s in $SIZES; do
    set -- $VARS; k=$(( (r - 1) % $# )); vs="${@:k+1} ${@:1:k}"  # order rotated each round
    for v in $vs; do
      p=$(pp)
      it=$(iters $s)
      case $v in
        auto) o=$($B/tools/chorusrun/chorusrun -np 2 $B/perf/all_gather_perf -b $s -e $s $it 2>&1);;
        main) o=$(/work/main/build-final/tools/chorusrun/chorusrun -np 2 /work/main/build-final/perf/all_gather_perf -b $s -e $s $it 2>&1);;
        fifo) o=$(CHORUS_CMA_MAX=0 $B/tools/chorusrun/chorusrun -np 2 $B/perf/all_gather_perf -b $s -e $s $it 2>&1);;
        cma) o=$(CHORUS_CMA_MAX=-1 $B/tools/chorusrun/chorusrun -np 2 $B/perf/all_gather_perf -b $s -e $s $it 2>&1);;
        cells0) o=$(CHORUS_PAIR_CELLS=0 CHORUS_CMA_MAX=0 $B/tools/chorusrun/chorusrun -np 2 $B/perf/all_gather_perf -b $s -e $s $it 2>&1);;
        c2m) o=$(CHORUS_CHUNKSIZE=2M CHORUS_CMA_MAX=0 $B/tools/chorusrun/chorusrun -np 2 $B/perf/all_gather_perf -b $s -e $s $it 2>&1);;
        c128k) o=$(CHORUS_CHUNKSIZE=128K CHORUS_CMA_MAX=0 $B/tools/chorusrun/chorusrun -np 2 $B/perf/all_gather_perf -b $s -e $s $it 2>&1);;
        mpi) o=$(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca pml ob1 -np 2 $B/perf/all_gather_mpi_perf -b $s -e $s $it 2>&1);;
        impi) o=$(env I_MPI_FABRICS=shm I_MPI_ROOT=$IMPI PATH=$IMPI/bin:$PATH $IMPI/bin/mpirun -np 2 $B/perf/all_gather_impi_perf -b $s -e $s $it 2>&1);;
      esac
      echo "R$r $s $v [$p] $(echo "$o" | grep -E "^ +[0-9]+ +[0-9]+ " | head -1 | awk '{print "oop", $6, "ip", $10, "wrong", $9, $13}')"
    done
  done
done
echo "== probe end $(pp)"
