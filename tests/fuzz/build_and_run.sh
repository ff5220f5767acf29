#!/bin/sh
# tests/fuzz/build_and_run.sh — build the libFuzzer targets for every parser of network
# and environment input with clang, and run each for a bounded time.
#
#   tests/fuzz/build_and_run.sh [TARGET...]
#
# Targets (tests/fuzz/fuzz_*.cc): boot_handshake (bootstrap secret + hello through the real
# HandshakeReader, root vetting, message framing), boot_ids (unique ids, address tables,
# root replies), tcp_wire (tcp transport hello and stripe headers against a receiver
# model), hostlist (Slurm host lists), rendezvous (tcp://host:port, CHORUS_SECRET).
#
# Environment: FUZZ_SECONDS (per target, default 60), FUZZ_JOBS (targets run at once,
# default nproc), FUZZ_OUT (build and corpus directory, default build-fuzz), CLANGXX
# (default clang++). Each target starts from a few seeds
# written here plus the corpus left by earlier runs in FUZZ_OUT. Exits non-zero as soon as
# a target finds a crash (its reproducer is left in FUZZ_OUT/<target>/, named crash-*),
# or when clang or its libFuzzer runtime is missing.
set -eu
cd "$(dirname "$0")/../.."
SRC=$(pwd)
OUT=${FUZZ_OUT:-build-fuzz}
SECS=${FUZZ_SECONDS:-60}
CXX=${CLANGXX:-clang++}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "build_and_run.sh: $CXX not found (apt-get install clang)" >&2
  exit 1
fi

FLAGS="-std=c++17 -gline-tables-only -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -I$SRC/include -I$SRC"
CORE="src/core/checks.cc src/core/debug.cc src/core/params.cc src/core/live_handles.cc src/api/errors.cc"
BOOT="src/bootstrap/wire.cc src/bootstrap/uniqueid.cc src/net/socket.cc src/net/address.cc
  src/net/random.cc
  src/bootstrap/secret.cc $CORE"

sources() {
  case $1 in
    boot_handshake|boot_ids) echo "$BOOT" ;;
    tcp_wire) echo "" ;;
    hostlist) echo "src/comm/hostlist.cc" ;;
    rendezvous) echo "src/comm/hostlist.cc src/bootstrap/secret.cc src/net/random.cc $CORE" ;;
    *) echo "unknown target $1" >&2; exit 2 ;;
  esac
}

# A few valid inputs to start from (the fuzzer mutates them into the interesting paths).
seed() {
  d=$OUT/$1/seeds
  mkdir -p "$d"
  python3 - "$1" "$d" <<'EOF'
import struct, sys
t, d = sys.argv[1], sys.argv[2]
secret = bytes(range(1, 17))
def hello(kind=1, rank=0, nranks=4, addr=True):
    sin = struct.pack("<HH4s8s", 2, 0x3930, bytes([127, 0, 0, 1]), b"\0" * 8) if addr else b""
    return struct.pack("<IHHiiI", 0x4F4C4843, 1, kind, rank, nranks, len(sin)) + sin.ljust(28, b"\0")
seeds = {}
if t == "boot_handshake":
    seeds = {"checkin": b"\x07" + secret + hello(),
             "p2p_msg": b"\x01" + secret + hello(kind=3) + struct.pack("<IiQ", 0x47534D43, 5, 4) + b"abcd",
             "wrong_secret": b"\x03" + bytes(16) + hello()}
elif t == "boot_ids":
    sin = struct.pack("<HH4s8s", 2, 0x3930, bytes([10, 0, 0, 1]), b"\0" * 8)
    seeds = {"id": struct.pack("<II", 0x43485253, len(sin)) + secret + sin.ljust(28, b"\0"),
             "table": struct.pack("<I", 16) + sin.ljust(28, b"\0")}
elif t == "tcp_wire":
    h = struct.pack("<QQii", 0x43484F5248454C4F, 0x1122334455667788, 1, 0)
    s = struct.pack("<QIIIHBB", 0, 100, 0, 100, 1, 0, 0xC7)
    seeds = {"one": h + b"\x13\x05" + b"\x00" + s}
elif t == "hostlist":
    seeds = {"a": b"node[01-03,7],login1", "b": b"r[1-2]-n[08-10]"}
elif t == "rendezvous":
    seeds = {"a": b"10.0.0.1:29500", "b": b"[fe80::1%eth0]:80", "c": b"00112233445566778899aabbccddeeff"}
for name, data in seeds.items():
    open("%s/%s" % (d, name), "wb").write(data)
EOF
}

TARGETS=${*:-boot_handshake boot_ids tcp_wire hostlist rendezvous}
# Builds one target (one clang command; the objects are not shared between targets).
build_target() {
  t=$1
  src=$(sources "$t")
  echo "== fuzz_$t: building" >&2
  # shellcheck disable=SC2086
  (cd "$SRC" && $CXX $FLAGS -o "$OUT/$t/fuzz_$t" "tests/fuzz/fuzz_$t.cc" $src -lpthread) ||
    echo "fuzz_$t: build FAILED" >"$OUT/$t/build-failed"
}

# Runs "$1 TARGET" for every target, FUZZ_JOBS of them (default: one per core) at once:
# each target is one single-threaded process, so CI gets a full FUZZ_SECONDS per target
# in a fraction of the serial time.
JOBS=${FUZZ_JOBS:-$(nproc)}
each_target() {
  running=0
  for t in $TARGETS; do
    "$1" "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
      wait
      running=0
    fi
  done
  wait
}

for t in $TARGETS; do
  mkdir -p "$OUT/$t/corpus"
  rm -f "$OUT/$t/build-failed" "$OUT/$t/verdict"
  seed "$t"
done
each_target build_target
for t in $TARGETS; do
  if [ -e "$OUT/$t/build-failed" ]; then
    cat "$OUT/$t/build-failed" >&2
    exit 1
  fi
done
# Runs one target for SECS seconds; its verdict goes to OUT/<target>/verdict.
run_target() {
  t=$1
  echo "== fuzz_$t: running ${SECS} s" >&2
  if (cd "$OUT/$t" && CHORUS_DEBUG=NONE ASAN_OPTIONS=detect_leaks=1 \
    ./"fuzz_$t" -max_total_time="$SECS" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 corpus seeds 2>"$OUT/$t/log.txt"); then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/$t/log.txt")
    cov=$(grep -o 'cov: [0-9]*' "$OUT/$t/log.txt" | tail -1)
    echo "fuzz_$t: ${runs:-?} inputs in ${SECS} s, ${cov:-cov ?}, no crash" >"$OUT/$t/verdict"
  else
    echo "fuzz_$t FAILED (reproducer: $OUT/$t/crash-*)" >"$OUT/$t/verdict"
  fi
}

each_target run_target
failed=0
for t in $TARGETS; do
  v=$(cat "$OUT/$t/verdict" 2>/dev/null || echo "fuzz_$t FAILED (no verdict)")
  echo "$v" >&2
  case $v in
    *FAILED*) failed=1; tail -40 "$OUT/$t/log.txt" >&2 ;;
  esac
done
exit $failed
