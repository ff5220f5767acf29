#!/bin/bash
# docs/PERF.md#perf-r36bind: inside a 2-host cluster, the default all-reduce 32K-256K under
# CHORUS_ALGO variants with this build's chorusrun (every host bound), main's chorusrun for the
# plain default, and the reproducible mode; 5 rounds interleaved. Run from the source root as
#   flock -x /work/measure.lock tools/cluster run -q --name r36balg --subnet 10.93.79 --hosts 2 \
#     -- env B=$PWD/BUILD M=$PWD/MAIN_BUILD SRC=$PWD perf/data/r36bind_algos.sh
# (M: a build dir whose tools/chorusrun/chorusrun is main's; it may link B's perf/).
read -r H0 H1 <<< "$CHORUS_CLUSTER_HOSTS"
OUT=$(mktemp -d); for r in 1 2 3 4 5; do
  echo "round $r pingpong: $($B/perf/chorus_membw --pingpong 2>&1 | tail -1 | grep -o '[0-9]* ns')"
  for v in main:def this:def this:ring this:direct this:tree this:repro; do
    who=${v%%:*}; a=${v#*:}; cr=$B; [ $who = main ] && cr=$M
    x=(); case $a in def) ;; repro) x=(-x CHORUS_REPRODUCIBLE=1) ;; *) x=(-x CHORUS_ALGO=$a) ;; esac
    $SRC/tools/cluster exec --name "$CHORUS_CLUSTER_NAME" "$H0" -- $cr/tools/chorusrun/chorusrun -H "$H0:2,$H1:2" --launch-agent "$CHORUS_CLUSTER_AGENT_EXE" "${x[@]}" $B/perf/all_reduce_perf -b 32K -e 256K -f 2 -n 400 -w 40 -c 0 --csv $OUT/$who-$a.$r.csv > /dev/null 2>&1 || echo "FAILED $v $r"
  done
done
OUT=$OUT python3 - <<'PY'
import csv,glob,os,statistics,collections
d=collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(os.environ['OUT'] + '/*.csv'):
    v=f.split('/')[-1].rsplit('.',2)[0]
    for row in csv.reader(open(f)):
        if row and row[0]!='collective' and row[8]=='out-of-place': d[v][int(row[3])].append(float(row[9]))
sizes=sorted(next(iter(d.values())))
print('variant       '+' '.join('%8d'%s for s in sizes))
for v in ['main-def','this-def','this-ring','this-direct','this-tree','this-repro']:
    print('%-13s '%v+' '.join('%8.1f'%statistics.median(d[v][s]) for s in sizes))
PY
rm -rf "$OUT"
