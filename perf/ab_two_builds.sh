#!/bin/bash
# perf/ab_two_builds.sh BASE NEW COLLS ROUNDS [B E F] — two Chorus build trees and Open MPI
# (the <coll>_mpi_perf twin of NEW, under mpirun with vader) in interleaved rounds (base,
# new, Open MPI, then the next collective), np 2 on shared memory; prints every run's time
# and, per collective, size and place, the medians and the ratios Open MPI / new and
# base / new (> 1: new is faster). Times come from algbw (size / algbw), which keeps three
# digits where the time column shows two. Each round starts with chorus_membw --pingpong
# (the cross-core round trip: ~120 ns near, ~500 far; docs/PERF.md "Slow and fast windows").
# Run it under the exclusive measure lock. N and W set -n and -w (default 20000 and 2000).
#
#   perf/ab_two_builds.sh build-main build gather,scatter 5 512 4096 8
set -u
BASE=$1; NEW=$2; COLLS=$3; R=$4; B=${5:-512}; E=${6:-4096}; F=${7:-8}
N=${N:-20000}; W=${W:-2000}
OUT=$(mktemp -d /tmp/chorus-ab-two-builds.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
for r in $(seq 1 "$R"); do
  echo "round $r pingpong: $("$NEW/perf/chorus_membw" --pingpong 2>&1 | tail -1 | grep -o '[0-9]* ns')"
  for c in ${COLLS//,/ }; do
    for lib in base new mpi; do
      case $lib in
        base) cmd=("$BASE/tools/chorusrun/chorusrun" -np 2 "$BASE/perf/${c}_perf") ;;
        new) cmd=("$NEW/tools/chorusrun/chorusrun" -np 2 "$NEW/perf/${c}_perf") ;;
        mpi) cmd=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca pml ob1
                  -np 2 "$NEW/perf/${c}_mpi_perf") ;;
      esac
      "${cmd[@]}" -b "$B" -e "$E" -f "$F" -n "$N" -w "$W" -c 1 >"$OUT/$c.$lib.$r.txt" 2>&1 ||
        echo "FAILED: $c $lib round $r"
    done
  done
done
python3 "$(dirname "$0")/ab_rows.py" two-builds "$OUT"
