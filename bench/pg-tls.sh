#!/usr/bin/env bash
# What TLS costs a PostgreSQL client: storbench's TPC-B-like run and
# pgbench's, and the select-only script (pgbench -S, and the same through
# storbench's client: crates/db/examples/select_only.rs), where a round trip
# is most of a transaction and TLS shows most, each with sslmode=disable and
# sslmode=require over TCP, in alternating rounds against one server and
# one set of pgbench tables. Prints the median TPS per tool and mode and the
# median ratio require/disable per tool, so storbench's TLS cost can be
# read beside libpq's (pgbench links libpq, which speaks OpenSSL).
#
#   bench/pg-tls.sh [--scale 10] [--clients "1 8"] [--duration 15] [--rounds 3]
#                   [--db postgres://root@127.0.0.1:5432/storbench_tls]
#
# Measurements never overlap: the script runs under
# flock /tmp/storbench-measure.lock (taken here if the caller did not).
set -euo pipefail
if [ -z "${STORBENCH_MEASURE_LOCKED:-}" ]; then
  export STORBENCH_MEASURE_LOCKED=1
  exec flock /tmp/storbench-measure.lock "$0" "$@"
fi
scale=10; clients="1 8"; duration=15; rounds=3
db=postgres://root@127.0.0.1:5432/storbench_tls
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) scale=$2; shift 2;; --clients) clients=$2; shift 2;;
    --duration) duration=$2; shift 2;; --rounds) rounds=$2; shift 2;;
    --db) db=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
. "$(dirname "$0")/common.sh"
cargo build --release -q -p storbench-db --example select_only --manifest-path "$here/Cargo.toml"
sel="${CARGO_TARGET_DIR:-$here/target}/release/examples/select_only"
pg_parts "$db"
ensure_db
"$sb" -q tpcb init --db "$db?sslmode=disable" --scale "$scale"
ssl=$(psql -qAt -h "$host" -p "$port" -U "$user" -d "$dbname" -c "SHOW ssl")
[ "$ssl" = on ] || { echo "the server has ssl = $ssl: nothing to compare" >&2; exit 2; }

vacuum() { psql -q -h "$host" -p "$port" -U "$user" -d "$dbname" -c "VACUUM pgbench_history" >/dev/null; }
# pgbench TPS for mode $1, clients $2, extra options after.
pgb() {
  local mode=$1 c=$2; shift 2
  PGSSLMODE=$mode pgbench -n "$@" -h "$host" -p "$port" -U "$user" -c "$c" -j "$c" -T "$duration" "$dbname" \
    2>/dev/null | awk '/^tps/ {print $3}'
}
sbS() { "$sel" "$db?sslmode=$1" "$2" "$duration" | awk '/^tps/ {print $2}'; }
sbt() {
  "$sb" -q --json tpcb run --db "$db?sslmode=$1" --clients "$2" --duration "${duration}s" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["steps"][0]["metrics"]["tps"]["value"])'
}

echo "scale $scale, ${duration}s per run, $rounds rounds, $(nproc) CPUs, $(date -u +%F), TCP to $host:$port"
printf "%8s %-16s %12s %12s %8s\n" clients tool disable require ratio
for c in $clients; do
  for t in sb pg sbS pgS; do : > "$work/$t.disable.$c"; : > "$work/$t.require.$c"; : > "$work/$t.ratio.$c"; done
  for r in $(seq "$rounds"); do
    for mode in disable require; do
      vacuum; sbt "$mode" "$c" >> "$work/sb.$mode.$c"
      vacuum; pgb "$mode" "$c" -M prepared >> "$work/pg.$mode.$c"
      sbS "$mode" "$c" >> "$work/sbS.$mode.$c"
      pgb "$mode" "$c" -M prepared -S >> "$work/pgS.$mode.$c"
    done
    for t in sb pg sbS pgS; do
      python3 -c "print($(tail -1 "$work/$t.require.$c") / $(tail -1 "$work/$t.disable.$c"))" >> "$work/$t.ratio.$c"
    done
  done
  for t in sb pg sbS pgS; do
    name=$(case $t in sb) echo "storbench tpcb";; pg) echo "pgbench tpcb";; sbS) echo "storbench -S";;
           pgS) echo "pgbench -S";; esac)
    printf "%8s %-16s %12.1f %12.1f %8.3f\n" "$c" "$name" "$(median < "$work/$t.disable.$c")" \
      "$(median < "$work/$t.require.$c")" "$(median < "$work/$t.ratio.$c")"
  done
done
