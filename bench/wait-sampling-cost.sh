#!/usr/bin/env bash
# What sampling the database's wait events costs the database (issue 28:
# goal under 1 % of its throughput): storbench's TPC-B on the local
# PostgreSQL with the sampler on (the default, 10 looks a second at
# pg_stat_activity on a connection of its own) and off (--no-wait-events),
# alternately, the order swapped every round so a drift favours neither;
# prints each run's TPS, the median TPS of each, and the median of the
# per-round ratios on/off. Run under the exclusive measurement lock:
#
#   flock /tmp/storbench-measure.lock bench/wait-sampling-cost.sh \
#       [--db URL] [--scale 10] [--clients 4] [--duration 20] [--rounds 5] [--sync-commit on|off]
#
# --sync-commit off (ALTER DATABASE ... SET synchronous_commit = off) takes
# the commit's WAL flush out: the server is then CPU-bound with its data
# cached, and the disk's flush time, which moves TPS ±10 % between runs on
# a shared disk, no longer hides a 1 % cost.
#
# SB=path/to/storbench takes that binary instead of building the release one.
# The database (default waits_bench) is made if missing and dropped at the end.
set -euo pipefail
db=postgres://root@127.0.0.1:5432/waits_bench; scale=10; clients=4; duration=20; rounds=5; sync_commit=on
while [ $# -gt 0 ]; do
  case "$1" in
    --db) db=$2; shift 2;; --scale) scale=$2; shift 2;; --clients) clients=$2; shift 2;;
    --duration) duration=$2; shift 2;; --rounds) rounds=$2; shift 2;; --sync-commit) sync_commit=$2; shift 2;;
    *) echo "unknown option $1 (allowed: --db --scale --clients --duration --rounds --sync-commit)" >&2; exit 2;;
  esac
done
case "$sync_commit" in on|off) ;; *) echo "--sync-commit $sync_commit: not one of on, off" >&2; exit 2;; esac
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/onoff.sh"
work=$(mktemp -d)
export STORBENCH_RESULTS="$work/results.db"
dbname=${db##*/}; hp=${db#postgres://}; hp=${hp%%/*}; user=${hp%%@*}; hp=${hp#*@}; host=${hp%%:*}; port=${hp##*:}
adm() { PGOPTIONS="-c client_min_messages=warning" psql -qAt -h "$host" -p "$port" -U "$user" -d postgres -c "$1" >/dev/null; }
trap 'adm "DROP DATABASE IF EXISTS $dbname WITH (FORCE)" || true; rm -rf "$work"' EXIT
adm "DROP DATABASE IF EXISTS $dbname WITH (FORCE)"
adm "CREATE DATABASE $dbname"
[ "$sync_commit" = off ] && adm "ALTER DATABASE $dbname SET synchronous_commit = off"
"$SB" -q tpcb init --db "$db" --scale "$scale" >/dev/null
# tps MODE: one run's client TPS (pgbench's), with the sampler on or off.
tps() {
  local flag=; [ "$1" = off ] && flag=--no-wait-events
  "$SB" --json -q tpcb run --db "$db" --clients "$clients" --duration "${duration}s" $flag 2>/dev/null \
    | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["steps"][0]["metrics"]["tps.client"]["value"])'
}
echo "TPC-B scale $scale, $clients clients, synchronous_commit=$sync_commit, ${duration}s per run, $rounds rounds each, $(nproc) CPUs, $(date -u +%F)"
alternate "$rounds"
