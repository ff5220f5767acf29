#!/bin/bash
# tcpsched_sit.sh — one sitting of branch tcpsched against main (BASE) on tcp 2 x 2, with the
# vCPUs' cache-line round trip before and after. Run under the exclusive measure lock:
#   flock -x -w 3000 /work/measure.lock perf/data/tcpsched_sit.sh BUILD BASE "PIN" OUT.txt
set -euo pipefail
HERE=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$1 BASE=$2 PINS=$3 OUT=$4
pp() { "$BUILD/perf/chorus_membw" --pingpong 2>&1 | grep -iE 'round|ns' | head -2; }
pin=()
[ -n "$PINS" ] && pin=(PIN="$PINS")
{
  echo "== $(date -u +%H:%M:%S) window before:"; pp
  env ROUNDS="${ROUNDS:-7}" COLLS=all_reduce CLUSTER=tcpsched SUBNET=10.93.57 "${pin[@]}" \
    BASE="$BASE" SMALL="${SMALL:--b 32K -e 256K -f 2 -n 400 -w 40}" \
    BIG="${BIG:--b 1M -e 1M -f 2 -n 20 -w 3}" "$HERE/perf/repro_cost.sh" "$BUILD" tcp2x2
  echo "== $(date -u +%H:%M:%S) window after:"; pp
} 2>&1 | tee "$OUT"
