#!/usr/bin/env bash
# TPC-H-like on the local PostgreSQL: storbench's build of SF N (load, keys,
# indexes, statistics) timed over rounds, against HammerDB 4.12's TPROC-H
# build of SF 1 on this machine (447 s, REFERENCE.md; HammerDB is not
# installed here, so it is not re-run side by side); then every query's
# answer against the SF 1 reference answers; then the driver's overhead:
# each query's time as storbench records it in a power test vs the server's
# own durations of the same statements (log_min_duration_statement = 0).
#
#   bench/tpch-build.sh [--scale 1] [--jobs 2] [--rounds 3]
#                       [--db postgres://root@127.0.0.1:5432/tpch_bench] [--log /var/log/postgresql/postgresql-15-main.log]
#
# The whole script runs under one flock /tmp/storbench-measure.lock (its
# timed parts must not overlap other measurements, and queueing once per
# part on a busy machine could take longer than the parts).
set -euo pipefail
lock=/tmp/storbench-measure.lock
if [ -z "${TPCH_BENCH_LOCKED:-}" ]; then
  exec flock "$lock" env TPCH_BENCH_LOCKED=1 "$0" "$@"
fi
scale=1; jobs=2; rounds=3
db=postgres://root@127.0.0.1:5432/tpch_bench
log=$(ls /var/log/postgresql/postgresql-*-main.log 2>/dev/null | head -1)
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) scale=$2; shift 2;; --jobs) jobs=$2; shift 2;; --rounds) rounds=$2; shift 2;;
    --db) db=$2; shift 2;; --log) log=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
. "$(dirname "$0")/common.sh"
pg_parts "$db"
ensure_db
last_run() { "$sb" --json results list | python3 -c "import json,sys; print(max(r['id'] for r in json.load(sys.stdin)))"; }

echo "TPC-H build, SF $scale, --jobs $jobs, $rounds rounds, $(nproc) CPUs, $(date -u +%F)"
printf "%6s %10s %10s %10s %10s %12s %10s\n" round total load indexes analyze "rows/s" "max RSS MB"
for r in $(seq "$rounds"); do
  /usr/bin/time -f "%M" -o "$work/rss" "$sb" -q tpch build --replace --db "$db" --scale "$scale" --jobs "$jobs"
  "$sb" results export "$(last_run)" --json > "$work/build.$r.json"
  python3 - "$work/build.$r.json" "$work/rss" "$r" >> "$work/builds" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["steps"][0]["metrics"]
v = lambda k: m[k]["value"]
rss = int(open(sys.argv[2]).read().split()[-1]) / 1024
print(f'{sys.argv[3]} {v("build.seconds"):.1f} {v("build.load_seconds"):.1f} {v("build.index_seconds"):.1f} {v("build.analyze_seconds"):.1f} {v("rows.per_s"):.0f} {rss:.0f}')
PY
  tail -1 "$work/builds" | awk '{printf "%6s %10s %10s %10s %10s %12s %10s\n", $1, $2, $3, $4, $5, $6, $7}'
done
med=$(awk '{print $2}' "$work/builds" | median)
echo "median build ${med} s; HammerDB 4.12 SF 1 (REFERENCE.md): 447 s; ratio HammerDB/storbench at SF 1: $(python3 -c "print(f'{447/$med:.1f}' if $scale == 1 else 'n/a (scale differs)')")"

if [ "$scale" = 1 ]; then
  echo "answers against the SF 1 reference (validation parameters):"
  "$sb" -q tpch check --db "$db" | tail -3 || echo "CHECK FAILED"
fi

if [ -n "$log" ] && [ -r "$log" ]; then
  echo "driver overhead: power test (validation parameters) vs the server's statement durations"
  psql -q -h "$host" -p "$port" -U "$user" -d postgres -c "ALTER DATABASE $dbname SET log_min_duration_statement = 0"
  trap 'psql -q -h "$host" -p "$port" -U "$user" -d postgres -c "ALTER DATABASE $dbname RESET log_min_duration_statement"; rm -rf "$work"' EXIT
  start=$(stat -c %s "$log")
  "$sb" -q tpch run --db "$db" --validation
  "$sb" results export "$(last_run)" --json > "$work/power.json"
  tail -c +"$((start + 1))" "$log" > "$work/server.log"
  python3 - "$work/power.json" "$work/server.log" "$dbname" <<'PY'
import json, re, sys, statistics
steps = json.load(open(sys.argv[1]))["steps"]
items = [(s["label"].split()[1], s["metrics"]["seconds"]["value"]) for s in steps if s["label"].startswith("power ")]
db = sys.argv[3]
# Statements of the run in order; storbench's own bookkeeping between items
# (temp-byte reads, backend id) separates one item from the next.
book = ("pg_stat_force_next_flush", "temp_bytes FROM pg_stat_database", "pg_backend_pid", "SET statement_timeout",
        "SELECT COUNT(*) FROM orders WHERE o_orderkey IN")
groups, cur, in_book = [], [], True
pat = re.compile(r"@" + re.escape(db) + r" .*duration: ([0-9.]+) ms +(?:statement|parse|bind|execute)[^:]*: (.*)")
for line in open(sys.argv[2], errors="replace"):
    m = pat.search(line)
    if not m:
        continue
    ms, text = float(m.group(1)), m.group(2)
    if any(b in text for b in book):
        if cur:
            groups.append(cur)
            cur = []
        continue
    cur.append(ms)
if cur:
    groups.append(cur)
# Setup (schema inspection, server info) comes first: pair from the end.
if len(groups) < len(items):
    print(f"  could not pair statements with items ({len(groups)} groups, {len(items)} items)")
    sys.exit(0)
groups = groups[len(groups) - len(items):]
print(f"  {'item':>5} {'storbench s':>12} {'server s':>10} {'diff ms':>9} {'diff %':>7}")
diffs, rels = [], []
for (name, sb_s), g in zip(items, groups):
    srv = sum(g) / 1000
    d = (sb_s - srv) * 1000
    rel = d / (srv * 1000) * 100 if srv > 0 else float("nan")
    if name.startswith("q"):
        diffs.append(d); rels.append(rel)
    print(f"  {name:>5} {sb_s:12.3f} {srv:10.3f} {d:9.2f} {rel:7.2f}")
ok = sum(1 for d, r in zip(diffs, rels) if d <= 5 or r <= 1)
print(f"  queries: median diff {statistics.median(diffs):.2f} ms, max {max(diffs):.2f} ms; within 1 % or 5 ms: {ok}/{len(diffs)}")
PY
fi
