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
#       [--db URL] [--scale 10] [--clients 4] [--duration 20] [--rounds 5]
#
# SB=path/to/storbench takes that binary instead of building the release one.
# The database (default waits_bench) is made if missing and dropped at the end.
set -euo pipefail
db=postgres://root@127.0.0.1:5432/waits_bench; scale=10; clients=4; duration=20; rounds=5
while [ $# -gt 0 ]; do
  case "$1" in
    --db) db=$2; shift 2;; --scale) scale=$2; shift 2;; --clients) clients=$2; shift 2;;
    --duration) duration=$2; shift 2;; --rounds) rounds=$2; shift 2;;
    *) echo "unknown option $1 (allowed: --db --scale --clients --duration --rounds)" >&2; exit 2;;
  esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${SB:-}" ]; then
  cargo build --release -q -p storbench --manifest-path "$here/Cargo.toml"
  SB="$here/target/release/storbench"
fi
work=$(mktemp -d)
export STORBENCH_RESULTS="$work/results.db"
dbname=${db##*/}; hp=${db#postgres://}; hp=${hp%%/*}; user=${hp%%@*}; hp=${hp#*@}; host=${hp%%:*}; port=${hp##*:}
adm() { PGOPTIONS="-c client_min_messages=warning" psql -qAt -h "$host" -p "$port" -U "$user" -d postgres -c "$1" >/dev/null; }
trap 'adm "DROP DATABASE IF EXISTS $dbname WITH (FORCE)" || true; rm -rf "$work"' EXIT
adm "DROP DATABASE IF EXISTS $dbname WITH (FORCE)"
adm "CREATE DATABASE $dbname"
"$SB" -q tpcb init --db "$db" --scale "$scale" >/dev/null
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# tps MODE: one run's client TPS (pgbench's), with the sampler on or off.
tps() {
  local flag=; [ "$1" = off ] && flag=--no-wait-events
  "$SB" --json -q tpcb run --db "$db" --clients "$clients" --duration "${duration}s" $flag 2>/dev/null \
    | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["steps"][0]["metrics"]["tps.client"]["value"])'
}
echo "TPC-B scale $scale, $clients clients, ${duration}s per run, $rounds rounds each, $(nproc) CPUs, $(date -u +%F)"
printf "%5s %10s %10s %8s\n" round on off on/off
: > "$work/on"; : > "$work/off"; : > "$work/ratio"
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="on off"; else order="off on"; fi
  for m in $order; do eval "t_$m=$(tps "$m")"; done
  echo "$t_on" >> "$work/on"; echo "$t_off" >> "$work/off"
  ratio=$(awk -v a="$t_on" -v b="$t_off" 'BEGIN { printf "%.4f", a / b }')
  echo "$ratio" >> "$work/ratio"
  printf "%5s %10.1f %10.1f %8s\n" "$r" "$t_on" "$t_off" "$ratio"
done
ratio=$(median < "$work/ratio")
printf "median %10.1f %10.1f %8s  (cost %.2f %%)\n" "$(median < "$work/on")" "$(median < "$work/off")" "$ratio" \
  "$(awk -v r="$ratio" 'BEGIN { print (1 - r) * 100 }')"
