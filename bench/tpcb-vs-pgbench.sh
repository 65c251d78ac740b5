#!/usr/bin/env bash
# TPC-B-like: pgbench and storbench alternately against one PostgreSQL, same
# tables (pgbench's), same scale and client counts; prints, per client
# count, the median TPS of each as the tool counts it (client) and as the
# server counts it (xact_commit of the database over the run, read once
# every session of the run has ended and so flushed its statistics), the
# median ratios storbench/pgbench of both, and the highest CPU steal seen
# in a run. Equal client and server counts show a ratio above 1 to be the
# driver's efficiency, not a different count; steal marks a round the
# hypervisor disturbed.
#
# pgbench runs in each query mode asked, prepared first (its best: parsed
# and planned once per session, as storbench's statements are) and simple
# (its default: text queries parsed every time); one row per client count
# and mode, storbench's figures beside each, every tool alternating within
# a round.
#
#   flock /tmp/storbench-measure.lock bench/tpcb-vs-pgbench.sh [--scale 10] [--clients "1 4 16"]
#       [--duration 20] [--rounds 3] [--db postgres://root@127.0.0.1:5432/storbench_bench]
#       [--modes "prepared simple"]
#
# The database is created if missing and initialised by storbench unless it
# already holds pgbench's tables at the scale asked (the tables are
# pgbench's own, so both tools run on the same data). The server count
# takes in each tool's few bookkeeping transactions (logins, pgbench's
# scale query, storbench's probes): a handful against thousands.
set -euo pipefail
scale=10; clients="1 4 16"; duration=20; rounds=3; modes="prepared simple"
db=postgres://root@127.0.0.1:5432/storbench_bench
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) scale=$2; shift 2;; --clients) clients=$2; shift 2;;
    --duration) duration=$2; shift 2;; --rounds) rounds=$2; shift 2;;
    --db) db=$2; shift 2;; --modes|--mode) modes=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
for m in $modes; do
  case "$m" in simple|extended|prepared) ;; *) echo "--modes: '$m' is not simple, extended or prepared" >&2; exit 2;; esac
done
. "$(dirname "$0")/common.sh"
pg_parts "$db"
ensure_db
q() { psql -qAt -h "$host" -p "$port" -U "$user" -d "$1" -c "$2"; }
have=$(q "$dbname" "SELECT count(*) FROM pgbench_branches" 2>/dev/null || echo 0)
if [ "$have" != "$scale" ]; then
  "$sb" -q tpcb init --db "$db" --scale "$scale" --replace
fi

# commits: the database's committed transactions once none of its sessions
# is left (a backend flushes its statistics as it exits).
commits() {
  while [ "$(q postgres "SELECT count(*) FROM pg_stat_activity WHERE datname = '$dbname'")" != 0 ]; do
    sleep 0.05
  done
  q postgres "SELECT xact_commit FROM pg_stat_database WHERE datname = '$dbname'"
}
# cpu: /proc/stat's total and steal ticks.
cpu() { awk '/^cpu / {t=0; for (i=2; i<=NF; i++) t+=$i; print t, $9}' /proc/stat; }
steal() { python3 -c "a,b='$1'.split(),'$2'.split(); print(100*(int(b[1])-int(a[1]))/max(1,int(b[0])-int(a[0])))"; }

echo "scale $scale, ${duration}s per run, $rounds rounds, pgbench -M ${modes// /, -M }, $(nproc) CPUs, $(date -u +%F)"
printf "%8s %9s %12s %12s %12s %12s %8s %8s %8s\n" clients mode pgbench pg.server storbench sb.server ratio r.server steal%
# One pgbench run: its TPS (as it counts) and the server's, into $work/*.$c.$m.
pgbench_run() {
  local c=$1 m=$2 x0 x1 s0 s1 pg
  q "$dbname" "VACUUM pgbench_history" >/dev/null
  x0=$(commits); s0=$(cpu)
  pg=$(pgbench -n -M "$m" -h "$host" -p "$port" -U "$user" -c "$c" -j "$c" -T "$duration" "$dbname" 2>/dev/null \
       | awk '/^tps/ {print $3}')
  x1=$(commits); s1=$(cpu)
  echo "$pg" >> "$work/pg.$c.$m"
  python3 -c "print(($x1 - $x0) / $duration)" >> "$work/pgs.$c.$m"
  steal "$s0" "$s1" >> "$work/steal.$c"
}
for c in $clients; do
  for f in sb sbs steal; do : > "$work/$f.$c"; done
  for m in $modes; do for f in pg pgs; do : > "$work/$f.$c.$m"; done; done
  for r in $(seq "$rounds"); do
    for m in $modes; do pgbench_run "$c" "$m"; done
    # Same starting point for each: vacuum the history growth away.
    q "$dbname" "VACUUM pgbench_history" >/dev/null
    y0=$(commits); t0=$(cpu)
    sb_tps=$("$sb" -q --json tpcb run --db "$db" --clients "$c" --duration "${duration}s" 2>/dev/null \
         | python3 -c 'import json,sys; print(json.load(sys.stdin)["steps"][0]["metrics"]["tps.client"]["value"])')
    y1=$(commits); t1=$(cpu)
    echo "$sb_tps" >> "$work/sb.$c"
    python3 -c "print(($y1 - $y0) / $duration)" >> "$work/sbs.$c"
    steal "$t0" "$t1" >> "$work/steal.$c"
  done
  sb_med=$(median < "$work/sb.$c"); sbs_med=$(median < "$work/sbs.$c")
  for m in $modes; do
    # Ratios of medians (the rounds alternate, so each median is of like rounds).
    pg_med=$(median < "$work/pg.$c.$m"); pgs_med=$(median < "$work/pgs.$c.$m")
    printf "%8s %9s %12.1f %12.1f %12.1f %12.1f %8.3f %8.3f %8.1f\n" "$c" "$m" \
      "$pg_med" "$pgs_med" "$sb_med" "$sbs_med" \
      "$(python3 -c "print($sb_med / $pg_med)")" "$(python3 -c "print($sbs_med / $pgs_med)")" \
      "$(sort -g "$work/steal.$c" | tail -1)"
  done
done
