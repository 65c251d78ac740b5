#!/usr/bin/env bash
# TPC-B-like: pgbench and storbench alternately against one PostgreSQL, same
# tables (pgbench's), same scale and client counts; prints the median TPS of
# each and the median ratio storbench/pgbench per client count.
#
#   bench/tpcb-vs-pgbench.sh [--scale 10] [--clients "1 4 16"] [--duration 20] [--rounds 3]
#                            [--db postgres://root@127.0.0.1:5432/storbench_bench] [--mode simple|prepared]
#
# The database is created if missing and initialised once by storbench (the
# tables are pgbench's own, so both tools run on the same data).
set -euo pipefail
scale=10; clients="1 4 16"; duration=20; rounds=3; mode=simple
db=postgres://root@127.0.0.1:5432/storbench_bench
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) scale=$2; shift 2;; --clients) clients=$2; shift 2;;
    --duration) duration=$2; shift 2;; --rounds) rounds=$2; shift 2;;
    --db) db=$2; shift 2;; --mode) mode=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
. "$(dirname "$0")/common.sh"
pg_parts "$db"
ensure_db
"$sb" -q tpcb init --db "$db" --scale "$scale"
echo "scale $scale, ${duration}s per run, $rounds rounds, pgbench -M $mode, $(nproc) CPUs, $(date -u +%F)"
printf "%8s %12s %12s %8s\n" clients pgbench storbench ratio
for c in $clients; do
  : > "$work/pg.$c"; : > "$work/sb.$c"; : > "$work/ratio.$c"
  for r in $(seq "$rounds"); do
    # Same starting point for both: vacuum the history growth away.
    psql -q -h "$host" -p "$port" -U "$user" -d "$dbname" -c "VACUUM pgbench_history" >/dev/null
    pg=$(pgbench -n -M "$mode" -h "$host" -p "$port" -U "$user" -c "$c" -j "$c" -T "$duration" "$dbname" 2>/dev/null \
         | awk '/^tps/ {print $3}')
    psql -q -h "$host" -p "$port" -U "$user" -d "$dbname" -c "VACUUM pgbench_history" >/dev/null
    sb_tps=$("$sb" -q --json tpcb run --db "$db" --clients "$c" --duration "${duration}s" \
         | python3 -c 'import json,sys; print(json.load(sys.stdin)["steps"][0]["metrics"]["tps"]["value"])')
    echo "$pg" >> "$work/pg.$c"; echo "$sb_tps" >> "$work/sb.$c"
    python3 -c "print($sb_tps / $pg)" >> "$work/ratio.$c"
  done
  printf "%8s %12.1f %12.1f %8.3f\n" "$c" "$(median < "$work/pg.$c")" "$(median < "$work/sb.$c")" "$(median < "$work/ratio.$c")"
done
