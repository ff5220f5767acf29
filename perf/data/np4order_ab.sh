#!/bin/bash
# np4order_ab.sh BUILD ROUNDS "-b .. -e .. -f .. -n .. -w .." — the np-4 all-reduce on the pair
# cells, lowest bit first (lo, the default) against highest bit first (hi,
# CHORUS_EXP_HIGH_BIT_FIRST=1, the experiment switch of branch np4order), interleaved: per round
# a ping probe (chorus_membw --pingpong), both variants (their order swapped every other
# round), a probe again. One line per round, variant and size:
#   round probe_before probe_after variant bytes oop_us ip_us wrong
# (µs from algbw: three digits). Run it under flock -x /work/measure.lock.
B=$1; R=$2; ARGS=$3
probe() { "$B/perf/chorus_membw" --pingpong 2>/dev/null | tail -1 | grep -o '[0-9]* ns' | grep -o '[0-9]*'; }
echo "# $(date -u +%H:%M:%S) $(uptime)"
for r in $(seq "$R"); do
  p0=$(probe)
  vs=(lo hi); [ $((r % 2)) = 0 ] && vs=(hi lo)
  tmp=$(mktemp -d)
  for v in "${vs[@]}"; do
    e=(); [ "$v" = hi ] && e=(CHORUS_EXP_HIGH_BIT_FIRST=1)
    env "${e[@]}" "$B/tools/chorusrun/chorusrun" -np 4 "$B/perf/all_reduce_perf" $ARGS -c 1 \
      >"$tmp/$v" 2>&1 || echo "FAILED round $r $v"
  done
  p1=$(probe)
  for v in "${vs[@]}"; do
    awk -v r="$r" -v p0="$p0" -v p1="$p1" -v v="$v" \
      'NF >= 13 && $1 ~ /^[0-9]+$/ {printf "%d %s %s %s %d %.2f %.2f %d\n", r, p0, p1, v, $1, $1/$7/1e3, $1/$11/1e3, $9+$13}' "$tmp/$v"
  done
  rm -rf "$tmp"
done
echo "# $(date -u +%H:%M:%S) $(uptime)"
