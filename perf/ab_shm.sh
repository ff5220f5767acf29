#!/bin/bash
# ab_shm.sh — interleaved A/B of Chorus settings (or libraries) on this host: each round runs
# every variant once, as a fresh `chorusrun -np NP <coll>_perf FLAGS -c 0`, then prints per
# size each variant's median time over the rounds (µs, every round's figure in brackets),
# out of place and then in place (perf/ab_table.py). The single-host sibling of
# perf/ab_tcp.sh, for A/B runs of one library's settings; against Open MPI use
# tools/perf-rounds.
#
# Usage: perf/ab_shm.sh BUILD_DIR "PERF FLAGS" "ENV1" ["ENV2" ...]
#   ENVn: the environment of variant n, e.g. "CHORUS_CMA_MAX=0", "X=1" (the default),
#         "LD_LIBRARY_PATH=<other build>/src" (another library under the same binary)
#   env NP=2 ROUNDS=5 COLL=all_reduce
# Example (docs/PERF.md "pushing the reduced shares"):
#   perf/ab_shm.sh build "-b 256K -e 16M -f 2 -n 50 -w 10" CHORUS_CMA_MAX=0 CHORUS_CMA_MAX=-1 X=1
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: $0 BUILD_DIR FLAGS ENV...}" && pwd)
FLAGS=${2:?usage: $0 BUILD_DIR FLAGS ENV...}
shift 2
[ $# -gt 0 ] || { echo "$0: no variants" >&2; exit 2; }
ROUNDS=${ROUNDS:-5}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  i=0
  for v in "$@"; do
    i=$((i + 1))
    echo "[ab_shm] round $r/$ROUNDS variant $i: $v" >&2
    # shellcheck disable=SC2086
    env $v "$BUILD/tools/chorusrun/chorusrun" -np "${NP:-2}" "$BUILD/perf/${COLL:-all_reduce}_perf" \
      $FLAGS -c 0 --csv "$TMP/v$i.$r.csv" > /dev/null
  done
done
python3 "$HERE/ab_table.py" --in-place "$TMP" "$@"
