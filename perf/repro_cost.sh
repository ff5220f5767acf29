#!/bin/bash
# repro_cost.sh — what the reproducible mode costs (issue 36, acceptance 3): all_reduce_perf
# and reduce_scatter_perf with CHORUS_REPRODUCIBLE=0 against =1, in interleaved rounds (each
# round runs both, each a fresh launch), then per size the median of each and their ratio
# (reproducible / default), out of place and in place, as the ratio of the medians and as the
# paired ratio (the median over rounds of each round's own ratio), with a mark where a ratio
# passes the limit (1.3x from 64 KiB, 2x below).
#
# Usage: perf/repro_cost.sh BUILD_DIR WHERE
#   WHERE  shm2 | shm4 (chorusrun -np 2 / 4 on this host) | tcp2x1 | tcp2x2 (2 namespaced
#          hosts, 1 or 2 ranks each, over tools/cluster; needs root; always torn down)
#   env ROUNDS=5 COLLS="all_reduce reduce_scatter" RAW=DIR (keep the CSVs)
#       BASE=BUILD_DIR (a second build, run in the same rounds right before BUILD_DIR's: its
#       table comes first, from RAW/base; to see what a change did in one sitting)
#       CLUSTER=rhostscost<2x1|2x2> SUBNET=10.83.0 (tcp: the namespaced hosts' cluster name and
#       subnet; give each concurrent run its own)
#       SMALL="-b 8 -e 512K -f 2 -n 200 -w 20"  BIG="-b 1M -e 128M -f 2 -n 10 -w 3"
#       (two sweeps: many iterations where a call takes microseconds, few where it takes
#       up to a second; 8 B - 128 MiB in all)
#       PIN="0 0 1 1" (rank r runs on the CPU in field r + 1, by taskset; "-" leaves a rank
#       free): where the ranks outnumber the CPUs the ratio follows where the scheduler put
#       them (docs/PERF.md#perf-r36wait: 2 x 2 namespaced hosts on 2 CPUs, each host's ranks
#       on one CPU is the default's fast placement), so each placement can be measured alone.
#       Unpinned, shm4 lands where the scheduler puts it; tcp2x2 where chorusrun's binding of
#       every host puts it (one rank of each host per CPU on 2 CPUs, docs/PERF.md#perf-r36bind)
# Example (docs/PERF.md "Reproducible mode: the cost"), each under the exclusive lock:
#   flock -x -w 1200 /work/measure.lock perf/repro_cost.sh build shm4
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
BUILD=$(cd "${1:?usage: $0 BUILD_DIR shm2|shm4|tcp2x1|tcp2x2}" && pwd)
WHERE=${2:?usage: $0 BUILD_DIR shm2|shm4|tcp2x1|tcp2x2}
ROUNDS=${ROUNDS:-5}
COLLS=${COLLS:-all_reduce reduce_scatter}
SMALL=${SMALL:--b 8 -e 512K -f 2 -n 200 -w 20}
BIG=${BIG:--b 1M -e 128M -f 2 -n 10 -w 3}
BASE=${BASE:+$(cd "$BASE" && pwd)}
case $WHERE in
  tcp*)
    if [ "${CHORUS_CLUSTER_NAME:-}" = "" ]; then  # bring the hosts up, run this inside
      export BASE  # (absolute: the run below starts from another directory)
      exec "$SRC/tools/cluster" run -q --name "${CLUSTER:-rhostscost${WHERE#tcp}}" \
        --subnet "${SUBNET:-10.83.0}" --hosts 2 --force -- "$0" "$BUILD" "$WHERE"
    fi ;;
esac
if [ -n "${RAW:-}" ]; then
  mkdir -p "$RAW"
  OUT=$(cd "$RAW" && pwd)
else
  OUT=$(mktemp -d)
  trap 'rm -rf "$OUT"' EXIT
fi
# launch B: the launcher of build B, as an array in `launch`
launcher() {
  case $WHERE in
    shm2 | shm4) launch=(env "$1/tools/chorusrun/chorusrun" -np "${WHERE#shm}") ;;
    tcp2x1 | tcp2x2)
      read -r H0 H1 <<< "$CHORUS_CLUSTER_HOSTS"
      ppn=${WHERE#tcp2x}
      launch=("$SRC/tools/cluster" exec --name "$CHORUS_CLUSTER_NAME" "$H0" -- env
              "$1/tools/chorusrun/chorusrun" -H "$H0:$ppn,$H1:$ppn"
              --launch-agent "$CHORUS_CLUSTER_AGENT_EXE") ;;
    *) echo "$0: WHERE is shm2, shm4, tcp2x1 or tcp2x2, not $WHERE" >&2; exit 2 ;;
  esac
}
# PIN: each rank execs taskset with its own field of the list (CHORUS_RANK, set by chorusrun).
pin=()
if [ -n "${PIN:-}" ]; then
  # shellcheck disable=SC2016  # the rank's own shell expands them
  pin=(-x "REPRO_COST_PIN=$PIN" sh -c 'set -f; set -- "$0" "$@"; c=$(echo $REPRO_COST_PIN |
    cut -d" " -f$((CHORUS_RANK + 1))); if [ -z "$c" ] || [ "$c" = - ]; then exec "$@"; fi
    exec taskset -c "$c" "$@"')
fi
builds=("$BUILD")
[ -n "$BASE" ] && builds=("$BASE" "$BUILD") && mkdir -p "$OUT/base"
start=$(date +%s)
for r in $(seq 1 "$ROUNDS"); do
  for coll in $COLLS; do
    for part in small big; do
      flags=$SMALL
      [ $part = big ] && flags=$BIG
      for b in "${builds[@]}"; do
        launcher "$b"
        dir=$OUT
        [ "$b" = "$BUILD" ] || dir=$OUT/base
        for mode in 0 1; do
          echo "[repro_cost] $WHERE round $r/$ROUNDS $coll $part $b CHORUS_REPRODUCIBLE=$mode" >&2
          # shellcheck disable=SC2086
          "${launch[@]}" -x CHORUS_REPRODUCIBLE=$mode "${pin[@]}" "$b/perf/${coll}_perf" $flags \
            -c 0 --csv "$dir/$coll.$part.m$mode.r$r.csv" > /dev/null
        done
      done
    done
  done
done
echo "# $WHERE, $(date -u '+%Y-%m-%d %H:%M UTC'), $(( $(date +%s) - start )) s, load average" \
  "$(cut -d' ' -f1-3 /proc/loadavg) at the end; $ROUNDS rounds; small: $SMALL; big: $BIG"
echo "# CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1)${PIN:+; ranks pinned to CPUs $PIN}"
if [ -n "$BASE" ]; then
  echo "# base: $BASE"
  python3 "$HERE/repro_cost_table.py" "$OUT/base" $COLLS
  echo "# build: $BUILD"
fi
python3 "$HERE/repro_cost_table.py" "$OUT" $COLLS
