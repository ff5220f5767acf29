#!/bin/sh
# scaling.sh — training throughput of chorus-train with 1 and with 2 ranks on this machine
# (issue 7, acceptance 4: 2 ranks >= 1.6x the samples/s of 1 rank on 2 cores).
#
# usage: trainer/scaling.sh [BUILD_DIR] [extra chorus-train flags...]
#   ROUNDS=3 (default): 1-rank and 2-rank runs alternate, so that load from other work on
#   the machine hits both alike; the best samples/s of each is reported, and the median of
#   the rounds' own 2-rank/1-rank ratios (issue 39 asks for ROUNDS=5 and that median).
# Each rank trains with one libtorch thread (the default of chorus-train) and the same
# per-rank batch (64), i.e. weak scaling as with DDP: 2 ranks process 128 samples a step.
set -eu
build=${1:-build}
[ $# -gt 0 ] && shift
rounds=${ROUNDS:-3}
run="$build/tools/chorusrun/chorusrun"
train="$build/trainer/chorus-train"
for f in "$run" "$train"; do
  [ -x "$f" ] || { echo "scaling.sh: $f not built (ninja -C $build)" >&2; exit 2; }
done
args="--model cnn --epochs 1 --train-limit 12800 --no-eval --no-progress $*"
best1=0
best2=0
ratios=""
i=0
while [ $i -lt "$rounds" ]; do
  i=$((i + 1))
  for np in 1 2; do
    # shellcheck disable=SC2086
    sps=$("$run" -np $np "$train" $args | awk '/^epoch 1\//{for(k=1;k<=NF;k++) if($k=="samples/s") print $(k+1)}')
    echo "round $i: $np rank(s): $sps samples/s (load $(cut -d' ' -f1 /proc/loadavg))"
    if [ $np -eq 1 ]; then best1=$(echo "$sps $best1" | awk '{print ($1>$2)?$1:$2}'); one=$sps;
    else best2=$(echo "$sps $best2" | awk '{print ($1>$2)?$1:$2}');
      ratios="$ratios $(echo "$sps $one" | awk '{printf "%.3f", $1/$2}')"; fi
  done
done
echo "median of the rounds' 2-rank/1-rank ratios:$ratios -> $(echo "$ratios" | tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END{printf "%.2f", (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}')x"
echo "best: 1 rank $best1 samples/s, 2 ranks $best2 samples/s, speedup $(echo "$best2 $best1" | awk '{printf "%.2f", $1/$2}')x"
