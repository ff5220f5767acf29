#!/bin/bash
# tcp_breakdown.sh — what one small all-reduce costs each rank, per call: context switches,
# CPU time and the system calls of the tcp path (perf stat with syscall tracepoints: no
# ptrace, so the counts are those of an undisturbed run; strace and perf trace add >= 10 us
# per call here and change what they measure).
#
# Usage: perf/tcp_breakdown.sh BUILD_DIR [BYTES [ITERS]]     (root; brings up 2 namespaced hosts)
#   env EXTRA_ENV="VAR=VALUE ..."  environment of the ranks (e.g. LD_LIBRARY_PATH=<other build>/src
#                                  for a before/after of the library under the same binary)
# Prints allreduce_latency's line (rank 0) and, per rank, the counters divided by the calls.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
if [ "${1:-}" != "--inner" ]; then
  BUILD=$(cd "${1:?usage: $0 BUILD_DIR [BYTES [ITERS]]}" && pwd)
  for f in tools/chorusrun/chorusrun perf/allreduce_latency; do
    [ -x "$BUILD/$f" ] || { echo "$0: missing $BUILD/$f (build it first)" >&2; exit 2; }
  done
  command -v perf >/dev/null || { echo "$0: perf not found" >&2; exit 2; }
  exec "$SRC/tools/cluster" -q run --name tcpbd --hosts 2 --force -- "$0" --inner "$BUILD" "${2:-8}" "${3:-20000}"
fi
BUILD=$2 BYTES=$3 ITERS=$4
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
read -r H0 H1 _ <<< "$CHORUS_CLUSTER_HOSTS"
EV=context-switches,task-clock
for s in sendmsg recvfrom futex epoll_wait epoll_ctl write read sched_yield; do
  EV=$EV,syscalls:sys_enter_$s
done
# shellcheck disable=SC2086
"$SRC/tools/cluster" exec --name "$CHORUS_CLUSTER_NAME" "$H0" -- env ${EXTRA_ENV:-} \
  "$BUILD/tools/chorusrun/chorusrun" -H "$H0:1,$H1:1" --launch-agent "$CHORUS_CLUSTER_AGENT" \
  sh -c "exec perf stat -e $EV -x, -o $OUT/perf.\$CHORUS_RANK.txt $BUILD/perf/allreduce_latency $BYTES $ITERS"
for r in 0 1; do
  # 20 warm-up calls besides the timed ones; start-up and teardown are in the counts too.
  awk -F, -v n=$((ITERS + 20)) -v r="$r" '$3 != "" && $1 ~ /^[0-9.]+$/ {
      v = $1 / n; u = ""; if ($3 == "task-clock") { v = v * 1000; u = " us" }
      e = $3; sub(/syscalls:sys_enter_/, "", e); printf "%s%s=%.3f%s", (k++ ? "; " : "rank " r " per call: "), e, v, u }
      END { print "" }' "$OUT/perf.$r.txt"
done
