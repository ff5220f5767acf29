#!/bin/bash
# ab_colls.sh — same-run A/B of two builds of the library over every collective at np 2
# and 4 on this host: for each (collective, np), perf/ab_shm.sh runs interleaved rounds of
# the same perf binary (from NEW_BUILD) against each build's libchorus (LD_LIBRARY_PATH; the
# binaries' RUNPATH yields to it) and prints each size's median per build, out of place
# and in place. Used for "behaviour and speed unchanged" checks of refactors (issue 40).
#
# Usage: perf/ab_colls.sh BASE_BUILD NEW_BUILD
#   env ROUNDS=5 NPS="2 4" COLLS="all_reduce broadcast reduce all_gather reduce_scatter
#       scatter gather alltoall" FLAGS="-b 8 -e 16M -f 8 -n 20 -w 5"
# Example (issue 40: main at efde243 against the plan branch; both lean builds):
#   git archive efde243 | tar -x -C /tmp/base && (cd /tmp/base && meson setup build
#     -Dcuda=disabled ... && ninja -C build src/libchorus.so.0.1.0)
#   perf/ab_colls.sh /tmp/base/build build-plan
# Take figures only while nothing else runs (pgrep -c 'cc1plus|nvcc|ld' prints 0).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BASE=$(cd "${1:?usage: $0 BASE_BUILD NEW_BUILD}" && pwd)
NEW=$(cd "${2:?usage: $0 BASE_BUILD NEW_BUILD}" && pwd)
FLAGS=${FLAGS:--b 8 -e 16M -f 8 -n 20 -w 5}
for np in ${NPS:-2 4}; do
  for coll in ${COLLS:-all_reduce broadcast reduce all_gather reduce_scatter scatter gather alltoall}; do
    echo "== $coll np $np ($FLAGS)"
    NP=$np COLL=$coll "$HERE/ab_shm.sh" "$NEW" "$FLAGS" \
      "LD_LIBRARY_PATH=$BASE/src" "LD_LIBRARY_PATH=$NEW/src"
  done
done
