#!/bin/bash
# compare_tcp.sh — all-reduce between two namespaced hosts over TCP: Chorus next to Open
# MPI (btl tcp,self) next to the link's own ceiling (iperf3), in one run, as markdown.
#
# Usage: perf/compare_tcp.sh BUILD_DIR          (needs root: it brings up tools/cluster)
#   env ROUNDS=5  rounds per sweep; each round runs Chorus then Open MPI back to back
#                 (interleaved) and the table shows each one's median time per size
#   env RAW=DIR   keep every run's output in DIR
#   env ONLY=small|large   run one of the two sweeps (default both)
#   env CHECK=0   skip the closing -c 1 correctness run (quick iterations only)
#   env CHORUS=BIN  another all_reduce_perf to stand in for Chorus (e.g. an older build's)
#   env HOSTS=N PPN=P   N namespaced hosts x P ranks each (default 2 x 1); ranks of one host
#                 share memory, hosts talk TCP (Chorus: hierarchical; Open MPI: btl vader
#                 inside a host when PPN > 1)
#   env BASE=BIN    a second Chorus all_reduce_perf (e.g. main's) run in every round too,
#                   shown in extra columns: before/after in the same run
#   env BASE_ENV="VAR=VALUE ..."  environment of the BASE runs only (e.g. the same binary
#                   with another setting: BASE=build/perf/all_reduce_perf BASE_ENV=...)
#   env CLUSTER_NAME=C CLUSTER_SUBNET=A.B.C  the tools/cluster name and subnet (default
#                   perftcp, 10.77.0): two runs at once need different ones
#   env CHORUS_SPIN_NS=...  fixes Chorus' spin (default: chosen at init; ranks that find
#                   one kernel runs more of them than it has CPUs wait without spinning, the
#                   counterpart of Open MPI's mpi_yield_when_idle below); the table's
#                   header lists the CHORUS_* settings
#
# Two hosts x one rank (2 ranks, float32 sum, 8 B to 256 MiB), launched from host 0: Chorus
# by chorusrun with the cluster's launch agent, Open MPI by mpirun with it as plm_rsh_agent.
# Prints markdown on stdout, progress on stderr. The cluster is always torn down.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)

if [ "${1:-}" != "--inner" ]; then
  BUILD=${1:?usage: $0 BUILD_DIR}
  BUILD=$(cd "$BUILD" && pwd)
  for f in tools/chorusrun/chorusrun perf/all_reduce_perf perf/all_reduce_mpi_perf; do
    [ -x "$BUILD/$f" ] || { echo "$0: missing $BUILD/$f (build it first)" >&2; exit 2; }
  done
  command -v iperf3 >/dev/null || { echo "$0: iperf3 not found (tools/deps installs it)" >&2; exit 2; }
  exec "$SRC/tools/cluster" run --name "${CLUSTER_NAME:-perftcp}" --subnet "${CLUSTER_SUBNET:-10.77.0}" \
    --hosts "${HOSTS:-2}" --force -- "$0" --inner "$BUILD"
fi

BUILD=$2
ROUNDS=${ROUNDS:-5}
read -r H0 H1 _ <<< "$CHORUS_CLUSTER_HOSTS"
PPN=${PPN:-1}
HLIST=$(for h in $CHORUS_CLUSTER_HOSTS; do printf '%s:%s,' "$h" "$PPN"; done)
HLIST=${HLIST%,}
NP=$(( $(wc -w <<< "$CHORUS_CLUSTER_HOSTS") * PPN ))
BTL=tcp,self
[ "$PPN" = 1 ] || BTL=tcp,vader,self
CLUSTER=("$SRC/tools/cluster" exec --name "$CHORUS_CLUSTER_NAME")
AGENT=$CHORUS_CLUSTER_AGENT
SUBNET=${CHORUS_CLUSTER_SUBNET:-10.77.0}
if [ -n "${RAW:-}" ]; then
  mkdir -p "$RAW"
  TMP=$(cd "$RAW" && pwd)
else
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
fi
log() { echo "[compare_tcp] $*" >&2; }
on() { local h=$1; shift; "${CLUSTER[@]}" "$h" -- "$@"; }

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
SECONDS=0

# The link's ceiling: iperf3 from host 0 to host 1, one stream and as many as Chorus uses
# per connection (CHORUS_NSOCKS, as auto resolves it below), with the congestion control Chorus puts on its
# sockets (CHORUS_TCP_CONGESTION, default auto: reno here, where one kernel runs all the
# namespaced hosts; empty: the system's, like Open MPI's).
# CHORUS_NSOCKS=auto (the default) is one socket where one kernel runs as many of the job's
# ranks as it has CPUs or more (every namespaced host here shares this kernel), two otherwise.
NSOCKS=${CHORUS_NSOCKS:-auto}
if [ "$NSOCKS" = auto ]; then
  if [ "$NP" -ge "$(nproc)" ]; then NSOCKS=1; else NSOCKS=2; fi
fi
IPERF_CC=${CHORUS_TCP_CONGESTION-auto}
[ "$IPERF_CC" = auto ] && IPERF_CC=reno
IPERF_CC_TEXT=${IPERF_CC:-"the system default"}
iperf() {
  on "$H1" iperf3 -s -1 -p 5201 > "$TMP/iperf-server.$1.txt" 2>&1 &
  local server=$!
  sleep 0.5
  on "$H0" iperf3 -c "$H1" -p 5201 -t 5 -P "$1" ${IPERF_CC:+-C "$IPERF_CC"} -J > "$TMP/iperf.$1.json"
  wait "$server" || true
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.2f" % (d["end"]["sum_received"]["bits_per_second"] / 8e9))' "$TMP/iperf.$1.json"
}
# Both ways at once, as a 2-rank all-reduce sends: one iperf3 per direction, each with
# $NSOCKS streams (separate processes: iperf3 --bidir runs both directions of an end on one
# thread, and on these 2 vCPUs that thread, not the link, was the limit). Prints the mean of
# the two directions' rates: the figure busbw of a 2-rank all-reduce compares with.
iperf_both_ways() {
  on "$H1" iperf3 -s -1 -p 5202 > "$TMP/iperf-server.both1.txt" 2>&1 &
  local s1=$!
  on "$H0" iperf3 -s -1 -p 5203 > "$TMP/iperf-server.both0.txt" 2>&1 &
  local s0=$!
  sleep 0.5
  on "$H0" iperf3 -c "$H1" -p 5202 -t 5 -P "$1" ${IPERF_CC:+-C "$IPERF_CC"} -J > "$TMP/iperf.fwd.json" &
  local c0=$!
  on "$H1" iperf3 -c "$H0" -p 5203 -t 5 -P "$1" ${IPERF_CC:+-C "$IPERF_CC"} -J > "$TMP/iperf.back.json"
  wait "$c0" || true
  wait "$s1" "$s0" || true
  python3 -c 'import json,sys
r=[json.load(open(f))["end"]["sum_received"]["bits_per_second"] / 8e9 for f in sys.argv[1:]]
print("%.2f %.2f %.2f" % (sum(r) / 2, r[0], r[1]))' "$TMP/iperf.fwd.json" "$TMP/iperf.back.json"
}
log "iperf3, 1 stream"
IPERF1=$(iperf 1)
# With one socket per peer (NSOCKS=1) the one-stream run is already the like-for-like one.
IPERFN_TEXT=""
if [ "$NSOCKS" != 1 ]; then
  log "iperf3, $NSOCKS streams"
  IPERFN_TEXT=", **$(iperf "$NSOCKS") GB/s** with $NSOCKS"
fi
log "iperf3, $NSOCKS streams each way at once"
read -r IPERFBOTH IPERFFWD IPERFBACK <<< "$(iperf_both_ways "$NSOCKS")"

# Both "hosts" share this machine's cores: without yielding, Open MPI's busy-polling ranks
# wait for the scheduler's 4 ms tick on every small message (measured: 4000 us vs 14 us).
# Chorus needs no counterpart: its ranks find out at init that one kernel runs them all
# (src/comm/hostid.h) and, where they outnumber its CPUs, wait in the crowded mode (no
# spin; yield, then sleep). CHORUS_SPIN_NS in the caller's environment overrides that.
CHORUS_ENV=$(env | { grep -E '^CHORUS_(SPIN_NS|TCP_|NSOCKS|SOCKET_BUFSIZE|BUFFSIZE|ALGO|PROTO)' || true; } | sort | tr '\n' ' ')
CHORUSRUN=("$BUILD/tools/chorusrun/chorusrun" -H "$HLIST" --launch-agent "$AGENT")
MPIRUN=(mpirun --allow-run-as-root -np "$NP" -H "$HLIST" --mca plm_rsh_agent "$AGENT"
        --mca btl "$BTL" --mca pml ob1 --mca mpi_yield_when_idle 1
        --mca oob_tcp_if_include "$SUBNET.0/24"
        --mca btl_tcp_if_include "$SUBNET.0/24")
SWEEPS=(
  "small -b 8 -e 64K -f 4 -n 200 -w 20"
  "large -b 256K -e 256M -f 4 -n 5 -w 1"
)
CHORUS_BIN=${CHORUS:-$BUILD/perf/all_reduce_perf}
for sweep in "${SWEEPS[@]}"; do
  read -r name flags <<< "$sweep"
  [ -z "${ONLY:-}" ] || [ "$ONLY" = "$name" ] || continue
  for round in $(seq 1 "$ROUNDS"); do
    log "$name round $round/$ROUNDS: chorus"
    # shellcheck disable=SC2086
    on "$H0" "${CHORUSRUN[@]}" "$CHORUS_BIN" $flags -c 0 \
        --csv "$TMP/chorus.$name.$round.csv" > "$TMP/chorus.$name.$round.txt"
    if [ -n "${BASE:-}" ]; then
      log "$name round $round/$ROUNDS: base"
      # shellcheck disable=SC2086
      # shellcheck disable=SC2086
      on "$H0" env ${BASE_ENV:-} "${CHORUSRUN[@]}" "$BASE" $flags -c 0 \
          --csv "$TMP/base.$name.$round.csv" > "$TMP/base.$name.$round.txt"
    fi
    log "$name round $round/$ROUNDS: mpi"
    # shellcheck disable=SC2086
    on "$H0" "${MPIRUN[@]}" "$BUILD/perf/all_reduce_mpi_perf" $flags -c 0 \
        --csv "$TMP/mpi.$name.$round.csv" > "$TMP/mpi.$name.$round.txt"
  done
done
if [ "${CHECK:-1}" = 1 ]; then
  log "correctness: chorus -c 1 over the whole range"
  on "$H0" "${CHORUSRUN[@]}" "$CHORUS_BIN" -b 8 -e 256M -f 4 -n 1 -w 0 -c 1 \
      > "$TMP/chorus.check.txt"
else
  echo "# skipped (CHECK=0)" > "$TMP/chorus.check.txt"
fi
WRONG=$(awk '!/^#/ && NF == 13 { w += $9 + $13 } END { print w + 0 }' "$TMP/chorus.check.txt")
ELAPSED=$SECONDS

cat <<EOF
### Over TCP between namespaced hosts: $(wc -w <<< "$CHORUS_CLUSTER_HOSTS") hosts x $PPN ranks

- $(wc -w <<< "$CHORUS_CLUSTER_HOSTS") hosts made by \`tools/cluster\` (network namespaces joined by veth pairs and a bridge,
  private \`/dev/shm\`), $PPN rank(s) each, launched from host 0; $(mpirun --version 2>/dev/null | head -1);
  Chorus $(git -C "$SRC" describe --always --dirty 2>/dev/null || echo '?'), CHORUS_NSOCKS=$NSOCKS.
- Measured $(date -u '+%Y-%m-%d %H:%M UTC'), $ELAPSED s for the whole script; load average $LOAD_BEFORE at the start.
- Command: \`perf/compare_tcp.sh $BUILD\` (ROUNDS=$ROUNDS interleaved rounds; median time and busbw per size;
  out-of-place; float32 sum).
- Chorus: \`chorusrun -H $HLIST --launch-agent "tools/cluster agent" all_reduce_perf FLAGS -c 0\`
  (Chorus settings in the environment: ${CHORUS_ENV:-none}${BASE:+; the before/BASE runs add: ${BASE_ENV:-nothing}})
- Open MPI: \`${MPIRUN[*]//$AGENT/tools/cluster agent} all_reduce_mpi_perf FLAGS -c 0\`
- FLAGS: $(for s in "${SWEEPS[@]}"; do read -r n f <<< "$s"; printf '%s: `%s`; ' "$n" "$f"; done)
- The link: iperf3 from host 0 to host 1, 5 s, congestion control $IPERF_CC_TEXT: **$IPERF1 GB/s** with one stream$IPERFN_TEXT
  (Chorus opens $NSOCKS per peer). A 2-rank all-reduce of S bytes sends S bytes each way per rank, so the
  link caps busbw (= algbw for 2 ranks) at about the iperf3 figure, if both directions run
  at full speed at once. Both ways at once ($NSOCKS streams each way, one iperf3 per
  direction, as the all-reduce runs): **$IPERFBOTH GB/s** per direction on average
  ($IPERFFWD host 0 to 1, $IPERFBACK back), the ceiling busbw meets when both directions
  share the CPUs that run the hosts' TCP stacks.
- Correctness: \`-c 1\` from 8 B to 256 MiB over the same link: #wrong total $WRONG.

| size | Chorus time (us) | Chorus busbw (GB/s) | Open MPI time (us) | Open MPI busbw (GB/s) | speedup (MPI time / Chorus time) |${BASE:+ before time (us) | before busbw (GB/s) | speedup (before / Chorus) |}
|---:|---:|---:|---:|---:|---:|${BASE:+---:|---:|---:|}
EOF
python3 - "$TMP" <<'PY'
import csv, glob, statistics, sys
tmp = sys.argv[1]
t, bw = {}, {}
for who, pat in (("c", "chorus"), ("m", "mpi"), ("b", "base")):
    for f in sorted(glob.glob("%s/%s.*.*.csv" % (tmp, pat))):
        for row in csv.reader(open(f)):
            if not row or row[0] == "collective" or row[8] != "out-of-place":
                continue
            key = int(row[3])
            t.setdefault((who, key), []).append(float(row[9]))
            bw.setdefault((who, key), []).append(float(row[11]))
def human(s):
    if s >= 1 << 20: return "%g MiB" % (s / 1048576)
    if s >= 1024: return "%g KiB" % (s / 1024)
    return "%d B" % s
for s in sorted({k for _, k in t}):
    cells = []
    med = {}
    for who in ("c", "m"):
        if (who, s) in t:
            med[who] = statistics.median(t[who, s])
            cells += ["%.2f" % med[who], "%.2f" % statistics.median(bw[who, s])]
        else:
            cells += ["-", "-"]
    r = "%.2fx" % (med["m"] / med["c"]) if "c" in med and "m" in med and med["c"] > 0 else "-"
    extra = ""
    if ("b", s) in t:
        mb = statistics.median(t["b", s])
        extra = " %.2f | %.2f | %.2fx |" % (mb, statistics.median(bw["b", s]), mb / med["c"])
    print("| %s | %s | %s |%s" % (human(s), " | ".join(cells), r, extra))
PY
echo
log "done in $ELAPSED s"
[ "$WRONG" = 0 ] || { log "the -c 1 run reported $WRONG wrong elements"; exit 1; }
