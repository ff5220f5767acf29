#!/bin/bash
# ab_tcp.sh — interleaved A/B of Chorus settings (or libraries) on namespaced hosts over tcp,
# next to Open MPI btl tcp in the same rounds: each round runs every variant, then Open MPI,
# each as a fresh all_reduce_perf (new connections, as perf/compare_tcp.sh does); prints the
# median time per size of each, with every round's figure in brackets.
#
# Usage: perf/ab_tcp.sh BUILD_DIR "ALL_REDUCE_PERF FLAGS" "ENV1" ["ENV2" ...]   (needs root)
#   ENVn: the environment of variant n, e.g. "CHORUS_ALGO=halving",
#         "LD_LIBRARY_PATH=<other build>/src" (another library under the same binary), "X=1"
#   env HOSTS=4 PPN=1 ROUNDS=3   the shape and the rounds
#   env MPI=1                    add Open MPI (btl tcp,self; tcp,vader,self when PPN > 1)
#   env CLUSTER_NAME=crowdtcp CLUSTER_SUBNET=10.82.0   the tools/cluster name and subnet
#   env RAW=DIR                  keep the CSVs (v1.ROUND.csv, ..., mpi.ROUND.csv)
#   env COLL=all_gather          another collective's perf binaries (default all_reduce)
# Example (docs/PERF.md "fourth stop: tcp crowd"):
#   MPI=1 HOSTS=2 PPN=2 perf/ab_tcp.sh build "-b 256K -e 4M -f 4 -n 5 -w 1" \
#       CHORUS_ALGO=halving CHORUS_ALGO=ring CHORUS_ALGO=tree
# The cluster is always torn down.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
if [ "${1:-}" != "--inner" ]; then
  BUILD=$(cd "${1:?usage: $0 BUILD_DIR FLAGS ENV...}" && pwd)
  shift
  exec "$SRC/tools/cluster" run --name "${CLUSTER_NAME:-crowdtcp}" --subnet "${CLUSTER_SUBNET:-10.82.0}" \
    --hosts "${HOSTS:-4}" --force -- "$0" --inner "$BUILD" "$@"
fi
shift
BUILD=$1
FLAGS=$2
shift 2
[ $# -gt 0 ] || { echo "$0: no variants" >&2; exit 2; }
PPN=${PPN:-1}
ROUNDS=${ROUNDS:-3}
read -r H0 _ <<< "$CHORUS_CLUSTER_HOSTS"
HLIST=$(for h in $CHORUS_CLUSTER_HOSTS; do printf '%s:%s,' "$h" "$PPN"; done)
HLIST=${HLIST%,}
NP=$(( $(wc -w <<< "$CHORUS_CLUSTER_HOSTS") * PPN ))
BTL=tcp,self
[ "$PPN" = 1 ] || BTL=tcp,vader,self
SUBNET=${CHORUS_CLUSTER_SUBNET:-10.82.0}
if [ -n "${RAW:-}" ]; then
  mkdir -p "$RAW"
  TMP=$(cd "$RAW" && pwd)
else
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
fi
on() { "$SRC/tools/cluster" exec --name "$CHORUS_CLUSTER_NAME" "$H0" -- "$@"; }
for r in $(seq 1 "$ROUNDS"); do
  i=0
  for v in "$@"; do
    i=$((i + 1))
    echo "[ab_tcp] round $r/$ROUNDS variant $i: $v" >&2
    # shellcheck disable=SC2086
    on env $v "$BUILD/tools/chorusrun/chorusrun" -H "$HLIST" --launch-agent "$CHORUS_CLUSTER_AGENT" \
      "$BUILD/perf/${COLL:-all_reduce}_perf" $FLAGS -c 0 --csv "$TMP/v$i.$r.csv" > /dev/null
  done
  if [ "${MPI:-0}" = 1 ]; then
    echo "[ab_tcp] round $r/$ROUNDS: Open MPI" >&2
    # shellcheck disable=SC2086
    on mpirun --allow-run-as-root -np "$NP" -H "$HLIST" --mca plm_rsh_agent "$CHORUS_CLUSTER_AGENT" \
      --mca btl "$BTL" --mca pml ob1 --mca mpi_yield_when_idle 1 \
      --mca oob_tcp_if_include "$SUBNET.0/24" --mca btl_tcp_if_include "$SUBNET.0/24" \
      "$BUILD/perf/${COLL:-all_reduce}_mpi_perf" $FLAGS -c 0 --csv "$TMP/mpi.$r.csv" > /dev/null
  fi
done
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; $NP ranks ($HLIST); FLAGS: $FLAGS; $ROUNDS rounds"
python3 "$HERE/ab_table.py" "$TMP" "$@"
