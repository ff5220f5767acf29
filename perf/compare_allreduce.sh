#!/bin/bash
# compare_allreduce.sh — Chorus vs Open MPI all-reduce on this machine, as markdown.
#
# Usage: perf/compare_allreduce.sh BUILD_DIR [NP ...]        (default NP: 2 4)
#   env ROUNDS=3   rounds per sweep; each round runs Chorus then Open MPI back to back,
#                  so both see the same machine state; the table keeps each one's best
#   env TYPE=float data type (any -d value both binaries support)
#   env RAW=DIR    keep every run's table and CSV in DIR (default: a temporary folder)
#
# Builds nothing: BUILD_DIR must hold tools/chorusrun/chorusrun, perf/all_reduce_perf,
# perf/all_reduce_mpi_perf and perf/chorus_membw. Prints the markdown that docs/PERF.md
# shows (machine, exact commands, one table per NP) on stdout; progress goes to stderr.
# Three sweeps per NP keep the whole run to a few minutes on 2 cores: small sizes with
# many iterations, medium, and large sizes with few.
set -euo pipefail

BUILD=${1:?usage: $0 BUILD_DIR [NP ...]}
shift
NPS=("$@")
[ ${#NPS[@]} -gt 0 ] || NPS=(2 4)
ROUNDS=${ROUNDS:-3}
TYPE=${TYPE:-float}

BUILD=$(cd "$BUILD" && pwd)
CHORUSRUN=$BUILD/tools/chorusrun/chorusrun
PERF=$BUILD/perf/all_reduce_perf
MPIPERF=$BUILD/perf/all_reduce_mpi_perf
MEMBW=$BUILD/perf/chorus_membw
for f in "$CHORUSRUN" "$PERF" "$MPIPERF" "$MEMBW"; do
  [ -x "$f" ] || { echo "$0: missing $f (build it first)" >&2; exit 2; }
done
command -v mpirun >/dev/null || { echo "$0: mpirun not found" >&2; exit 2; }

CORES=$(nproc)
if [ -n "${RAW:-}" ]; then
  mkdir -p "$RAW"
  TMP=$(cd "$RAW" && pwd)
else
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
fi

# Open MPI: shared memory only; as root it needs --allow-run-as-root. With more ranks
# than cores it must yield when idle, or busy-polling ranks starve each other.
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl "self,vader" --mca pml ob1)

# name  nccl-tests flags
SWEEPS=(
  "small  -b 8 -e 64K -f 2 -n 500 -w 50"
  "medium -b 128K -e 8M -f 2 -n 40 -w 5"
  "large  -b 16M -e 256M -f 2 -n 5 -w 1"
)

log() { echo "[compare_allreduce] $*" >&2; }

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
SECONDS=0
log "memory rates (chorus_membw)"
"$MEMBW" 64K 128K 256K 512K 1M 2M 4M 8M 16M 32M 64M 128M 256M > "$TMP/membw.txt"

for np in "${NPS[@]}"; do
  mpi_extra=()
  [ "$np" -gt "$CORES" ] && mpi_extra=(--mca mpi_yield_when_idle 1)
  for sweep in "${SWEEPS[@]}"; do
    read -r name flags <<< "$sweep"
    for round in $(seq 1 "$ROUNDS"); do
      log "np $np $name round $round/$ROUNDS: chorus"
      # shellcheck disable=SC2086
      "$CHORUSRUN" -np "$np" "$PERF" $flags -c 0 -d "$TYPE" \
          --csv "$TMP/chorus.$np.$name.$round.csv" > "$TMP/chorus.$np.$name.$round.txt"
      log "np $np $name round $round/$ROUNDS: mpi"
      # shellcheck disable=SC2086
      "${MPIRUN[@]}" "${mpi_extra[@]}" -np "$np" "$MPIPERF" $flags -c 0 -d "$TYPE" \
          --csv "$TMP/mpi.$np.$name.$round.csv" > "$TMP/mpi.$np.$name.$round.txt"
    done
  done
done
ELAPSED=$SECONDS
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# --- markdown ------------------------------------------------------------------------
model=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
flags_of() { for s in "${SWEEPS[@]}"; do read -r n f <<< "$s"; echo "  $n: $f"; done; }
cat <<EOF
### Machine
- CPU: $model, $CORES cores ($(lscpu | sed -n 's/^Thread(s) per core: *//p') thread(s) per core), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) memory, $(uname -sr)
- $(mpirun --version 2>/dev/null | head -1); Chorus $(git -C "$(dirname "$0")/.." describe --always --dirty 2>/dev/null || echo '?')
- Measured $(date -u '+%Y-%m-%d %H:%M UTC'), $ELAPSED s for the whole script; load average
  (1/5/15 min) $LOAD_BEFORE at the start, $LOAD_AFTER at the end (the script's own ranks
  raise the second; a first value above ~0.5 means other work shared the $CORES cores)

### How it was run
\`perf/compare_allreduce.sh $BUILD ${NPS[*]}\` (ROUNDS=$ROUNDS, TYPE=$TYPE): for each np, each sweep
below runs $ROUNDS rounds of Chorus then Open MPI back to back; each size keeps its best
(lowest) time over the rounds. Out-of-place numbers; \`-c 0\` (results are checked in
separate runs with \`-c 1\`). Busbw = algbw × 2(n−1)/n, as in nccl-tests.

- Chorus: \`chorusrun -np NP all_reduce_perf FLAGS -c 0 -d $TYPE\`
- Open MPI: \`${MPIRUN[*]} [--mca mpi_yield_when_idle 1 when NP > $CORES] -np NP all_reduce_mpi_perf FLAGS -c 0 -d $TYPE\`
- FLAGS per sweep:
$(flags_of)

The floor: the least time one rank needs for its share of a ring all-reduce of S bytes:
(n−1)/n·S bytes reduced (\`c = a + b\`, per output byte) plus (n−1)/n·S bytes copied, at
the slower of two sets of rates measured by \`chorus_membw\` (below): one core working on
S-byte buffers ("copy", "reduce": where the user's buffers live, cache or DRAM), and data
the other core has just written, in pieces of min(S, 1 MiB) ("xcopy", "xreduce": moving
lines between cores, as a pipelined design does); times ceil(n / $CORES) ranks sharing a
core; shown as the busbw it would give. It counts no latency (so it is left out below
64 KiB), no synchronization and no staging copy: a design with a staging copy pays more,
one where peers read the user's buffer directly can approach it.

EOF

for np in "${NPS[@]}"; do
  cat "$TMP"/chorus."$np".*.csv | grep -v '^collective' > "$TMP/c.$np.csv" || true
  cat "$TMP"/mpi."$np".*.csv | grep -v '^collective' > "$TMP/m.$np.csv" || true
  echo "### np $np ($TYPE, sum)"
  echo
  awk -F, -v np="$np" -v cores="$CORES" -v chunk=1048576 '
    function at(sz,   q, k) {  # index of the largest measured size <= sz (else the smallest)
      k = 1; for (q = 1; q <= nm; q++) if (msz[q] + 0 <= sz) k = q
      return k
    }
    FILENAME ~ /membw/ {
      if ($0 ~ /^#/) next
      split($0, f, " "); msz[++nm] = f[1]; mcopy[nm] = f[2]; mred[nm] = f[3]
      # cross-core rates when measured (2+ cpus), else the one-core ones
      xcopy[nm] = (f[4] + 0 > 0) ? f[4] : f[2]; xred[nm] = (f[5] + 0 > 0) ? f[5] : f[3]; next
    }
    $9 != "out-of-place" { next }
    {
      key = $4 + 0; sizes[key] = 1
      which = (FILENAME ~ /\/c\./) ? "c" : "m"
      if (!((which, key) in t) || $10 + 0 < t[which, key]) { t[which, key] = $10 + 0; bw[which, key] = $12 + 0 }
    }
    END {
      n = 0; for (s in sizes) order[++n] = s + 0
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (order[j] < order[i]) { x = order[i]; order[i] = order[j]; order[j] = x }
      printf "| size | Chorus time (us) | Chorus busbw (GB/s) | Open MPI time (us) | Open MPI busbw (GB/s) | speedup (MPI time / Chorus time) | floor busbw (GB/s) |\n"
      printf "|---:|---:|---:|---:|---:|---:|---:|\n"
      for (i = 1; i <= n; i++) {
        s = order[i]
        if (s >= 1073741824) h = sprintf("%g GiB", s / 1073741824)
        else if (s >= 1048576) h = sprintf("%g MiB", s / 1048576)
        else if (s >= 1024) h = sprintf("%g KiB", s / 1024)
        else h = s " B"
        ct = (("c", s) in t) ? sprintf("%.2f", t["c", s]) : "-"
        cb = (("c", s) in t) ? sprintf("%.2f", bw["c", s]) : "-"
        mt = (("m", s) in t) ? sprintf("%.2f", t["m", s]) : "-"
        mb = (("m", s) in t) ? sprintf("%.2f", bw["m", s]) : "-"
        ratio = "-"
        if ((("c", s) in t) && (("m", s) in t) && t["c", s] > 0) ratio = sprintf("%.2fx", t["m", s] / t["c", s])
        fl = "-"
        if (s >= 65536 && nm > 0) {
          k = at(s); x = at(s < chunk ? s : chunk)
          local = 1 / mred[k] + 1 / mcopy[k]      # ns per byte, user buffers of S bytes
          cross = 1 / xred[x] + 1 / xcopy[x]      # ns per byte, peer data in chunks
          perRank = (np - 1) / np * s * (local > cross ? local : cross) / 1e9
          tfloor = perRank * int((np + cores - 1) / cores)
          fl = sprintf("%.2f", s / tfloor / 1e9 * 2 * (np - 1) / np)
        }
        printf "| %s | %s | %s | %s | %s | %s | %s |\n", h, ct, cb, mt, mb, ratio, fl
      }
    }' "$TMP/membw.txt" "$TMP/c.$np.csv" "$TMP/m.$np.csv"
  echo
done

echo "### Memory rates used for the floor (chorus_membw, GB/s)"
echo
echo '```'
cat "$TMP/membw.txt"
echo '```'
log "done in $ELAPSED s"
