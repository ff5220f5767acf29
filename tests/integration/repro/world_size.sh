#!/bin/sh
# world_size.sh — the same float16 data summed at np 2, 3 and 4 (world_size_check.cc): are the
# bits the same at every world size?
#   world_size.sh CHORUSRUN CHECKER METHOD same|differ
# same:   the three runs' digests must be equal (the float64 recipe; each run also checks the
#         exact sum itself);
# differ: they must not all be equal (the rank-order mode: so the comparison can fail).
# The environment (CHORUS_REPRODUCIBLE, CHORUS_ALGO, ...) passes on to the ranks.
set -u
run=$1 check=$2 method=$3 want=$4
digests=""
for np in 2 3 4; do
  d=$("$run" -np $np "$check" --method "$method" | sed -n 's/^digest //p') || {
    echo "world_size.sh: $method at np $np failed" >&2
    exit 1
  }
  [ -n "$d" ] || { echo "world_size.sh: $method at np $np printed no digest" >&2; exit 1; }
  echo "$method np $np: digest $d"
  digests="$digests $d"
done
distinct=$(printf '%s\n' $digests | sort -u | wc -l)
case $want in
  same) [ "$distinct" -eq 1 ] || { echo "world_size.sh: $method: the bits change with the world size" >&2; exit 1; } ;;
  differ) [ "$distinct" -gt 1 ] || { echo "world_size.sh: $method: the same bits at np 2, 3 and 4: the data show nothing" >&2; exit 1; } ;;
  *) echo "world_size.sh: want same or differ, not $want" >&2; exit 2 ;;
esac
echo "world_size.sh: $method: $distinct distinct digest(s) over np 2, 3, 4 (wanted $want)"
