#!/bin/bash
# ab_shm.sh — interleaved A/B of Chorus settings (or libraries) on this host: each round runs
# every variant once, as a fresh `chorusrun -np NP <coll>_perf FLAGS -c 0`, then prints per
# size each variant's median time out of place / in place over the rounds (µs). The
# single-host sibling of perf/ab_tcp.sh, for A/B runs of one library's settings; against
# Open MPI use tools/perf-rounds.
#
# Usage: perf/ab_shm.sh BUILD_DIR "PERF FLAGS" "ENV1" ["ENV2" ...]
#   ENVn: the environment of variant n, e.g. "CHORUS_CMA_MAX=0", "X=1" (the default),
#         "LD_LIBRARY_PATH=<other build>/src" (another library under the same binary)
#   env NP=2 ROUNDS=5 COLL=all_reduce
# Example (docs/PERF.md "pushing the reduced shares"):
#   perf/ab_shm.sh build "-b 256K -e 16M -f 2 -n 50 -w 10" CHORUS_CMA_MAX=0 CHORUS_CMA_MAX=-1 X=1
set -euo pipefail
BUILD=$(cd "${1:?usage: $0 BUILD_DIR FLAGS ENV...}" && pwd)
FLAGS=${2:?usage: $0 BUILD_DIR FLAGS ENV...}
shift 2
[ $# -gt 0 ] || { echo "$0: no variants" >&2; exit 2; }
TMP=$(mktemp)
trap 'rm -f "$TMP"' EXIT
for r in $(seq 1 "${ROUNDS:-5}"); do
  i=0
  for v in "$@"; do
    i=$((i + 1))
    echo "[ab_shm] round $r/${ROUNDS:-5} variant $i: $v" >&2
    # shellcheck disable=SC2086
    env $v "$BUILD/tools/chorusrun/chorusrun" -np "${NP:-2}" "$BUILD/perf/${COLL:-all_reduce}_perf" \
      $FLAGS -c 0 | awk -v i="$i" '/^ +[0-9]+ /{print i, $1, $6, $10}' >> "$TMP"
  done
done
python3 - "$TMP" "$@" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    v, size, oop, ip = line.split()
    rows[(int(size), int(v))].append((float(oop), float(ip)))
variants = sys.argv[2:]
for i, v in enumerate(variants, 1):
    print(f"# v{i} = {v}")
print("%10s  %s" % ("bytes", "  ".join(f"{'v%d oop/ip' % i:>19}" for i in range(1, len(variants) + 1))))
for size in sorted({k[0] for k in rows}):
    cells = []
    for i in range(1, len(variants) + 1):
        runs = rows.get((size, i), [])
        if not runs:
            cells.append(f"{'-':>19}")
            continue
        cells.append(f"{statistics.median(r[0] for r in runs):9.1f}/{statistics.median(r[1] for r in runs):<9.1f}")
    print("%10d  %s" % (size, "  ".join(cells)))
PY
