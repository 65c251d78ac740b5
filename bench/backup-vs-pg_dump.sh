#!/usr/bin/env bash
# Backup: pg_dump run directly and `storbench backup --method dump` alternately
# on one TPC-C database; prints the median seconds of each and the median
# ratio storbench/pg_dump (storbench only times and observes the same tool,
# so the ratio should sit at 1.0 within the noise).
#
#   bench/backup-vs-pg_dump.sh [--warehouses 2] [--jobs 2] [--rounds 5]
#                              [--db postgres://root@127.0.0.1:5432/storbench_bench_bk]
#
# Run it under `flock /tmp/storbench-measure.lock` on a shared machine.
set -euo pipefail
warehouses=2; jobs=2; rounds=5
db=postgres://root@127.0.0.1:5432/storbench_bench_bk
while [ $# -gt 0 ]; do
  case "$1" in
    --warehouses) warehouses=$2; shift 2;; --jobs) jobs=$2; shift 2;;
    --rounds) rounds=$2; shift 2;; --db) db=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
. "$(dirname "$0")/common.sh"
pg_parts "$db"
ensure_db
"$sb" -q tpcc build --db "$db" --warehouses "$warehouses" --replace
echo "tpcc $warehouses warehouse(s), pg_dump -Fd -j $jobs, $rounds rounds, $(nproc) CPUs, $(date -u +%F)"
: > "$work/pg"; : > "$work/sb"; : > "$work/ratio"
for r in $(seq "$rounds"); do
  rm -rf "$work/d1" "$work/d2"
  t0=$(date +%s.%N)
  pg_dump -h "$host" -p "$port" -U "$user" -Fd -j "$jobs" -Z0 -f "$work/d1" "$dbname"
  pg=$(python3 -c "import time; print(time.time() - $t0)")
  sbt=$("$sb" -q --json backup --db "$db" --method dump --jobs "$jobs" --to "$work/d2" \
       | python3 -c 'import json,sys; print(json.load(sys.stdin)["steps"][0]["metrics"]["backup.seconds"]["value"])')
  echo "$pg" >> "$work/pg"; echo "$sbt" >> "$work/sb"
  python3 -c "print($sbt / $pg)" >> "$work/ratio"
done
printf "%12s %12s %8s\n" "pg_dump s" "storbench s" ratio
printf "%12.2f %12.2f %8.3f\n" "$(median < "$work/pg")" "$(median < "$work/sb")" "$(median < "$work/ratio")"
