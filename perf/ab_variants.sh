#!/bin/bash
# perf/ab_variants.sh ROUNDS COLLS B E F LABEL=BUILD[:VAR=V[,VAR=V]] ... — Chorus builds and
# settings in interleaved rounds (the shape of perf/ab_two_builds.sh, without Open MPI): per
# round and collective, a ping probe (chorus_membw --pingpong: ~120 ns near, ~500 ns far)
# and then `chorusrun -np 2 BUILD/perf/<coll>_perf -b B -e E -f F -n N -w W -c 1` for every
# variant in turn; prints the probes and, per collective and size, each variant's median µs
# (from algbw, out of place) and the first variant's over the second's. Run it under the
# exclusive measure lock. N and W from the environment (default 20000 and 2000); NP the ranks
# (default 2).
#
#   perf/ab_variants.sh 7 gather,scatter 512 1024 2 main=build-base branch=build-small2 \
#       size0=build-small2:CHORUS_FLIGHT_RECORDER_SIZE=0
set -u
R=$1; COLLS=$2; B=$3; E=$4; F=$5; shift 5
N=${N:-20000}; W=${W:-2000}; NP=${NP:-2}
OUT=$(mktemp -d /tmp/chorus-ab-variants.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
LABELS=()
for v in "$@"; do LABELS+=("${v%%=*}"); done
for r in $(seq 1 "$R"); do
  for c in ${COLLS//,/ }; do
    first=${1#*=}; first=${first%%:*}
    echo "round $r $c pingpong: $("$first/perf/chorus_membw" --pingpong 2>&1 | tail -1 | grep -o '[0-9]* ns')"
    for v in "$@"; do
      label=${v%%=*}; spec=${v#*=}; bld=${spec%%:*}; envs=()
      [[ $spec == *:* ]] && IFS=, read -ra envs <<<"${spec#*:}"
      env "${envs[@]}" "$bld/tools/chorusrun/chorusrun" -np "$NP" "$bld/perf/${c}_perf" -b "$B" -e "$E" \
        -f "$F" -n "$N" -w "$W" -c 1 >"$OUT/$c.$label.$r.txt" 2>&1 || echo "FAILED: $c $label round $r"
    done
  done
done
python3 "$(dirname "$0")/ab_rows.py" variants "$OUT" "${LABELS[@]}"
