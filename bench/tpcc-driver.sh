#!/usr/bin/env bash
# TPC-C-like driver speed: NOPM and TPM at 1, 2 and 4 users on 4 warehouses of
# one PostgreSQL (server-side PL/pgSQL functions, no think time, as the
# HammerDB reference), with storbench's own CPU seconds per transaction, and
# the time to build 10 warehouses.
#
#   bench/tpcc-driver.sh [--users "1 2 4"] [--warehouses 4] [--rampup 10] [--duration 60]
#                        [--rounds 3] [--build-warehouses 10] [--db postgres://root@127.0.0.1:5432/storbench_tpcc]
#
# Reference on this machine (issue #3): HammerDB 4.12 reached 37,430 / 45,568 /
# 58,195 NOPM at 1 / 2 / 4 users on 4 warehouses, and built 4 warehouses in 33 s.
set -euo pipefail
users="1 2 4"; wh=4; rampup=10; duration=60; rounds=3; build_wh=10
db=postgres://root@127.0.0.1:5432/storbench_tpcc
while [ $# -gt 0 ]; do
  case "$1" in
    --users) users=$2; shift 2;; --warehouses) wh=$2; shift 2;;
    --rampup) rampup=$2; shift 2;; --duration) duration=$2; shift 2;;
    --rounds) rounds=$2; shift 2;; --build-warehouses) build_wh=$2; shift 2;;
    --db) db=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
. "$(dirname "$0")/common.sh"
pg_parts "$db"
ensure_db
field() { python3 -c "import json,sys; d=json.load(sys.stdin); m=d['steps'][0]['metrics'] if d['steps'] else {}; print(m.get('$1',{}).get('value','nan'))"; }

echo "$(date -u +%F), $(nproc) CPUs, $(psql -qAt -h "$host" -p "$port" -U "$user" -d postgres -c 'SHOW server_version')"
# Build speed: 10 warehouses, indexes and procedures included.
start=$(date +%s.%N)
"$sb" -q --json tpcc build --db "$db" --warehouses "$build_wh" --replace > "$work/build.json"
end=$(date +%s.%N)
rows=$(field rows < "$work/build.json")
python3 -c "print(f'build: $build_wh warehouses in {($end-$start):.1f} s wall ({float($rows)/($end-$start):,.0f} rows/s)')"

"$sb" -q tpcc build --db "$db" --warehouses "$wh" --replace
declare -A ref=([1]=37430 [2]=45568 [4]=58195)
# Rounds outermost, so drift of a noisy machine spreads over every user count.
# Each run starts from a VACUUMed database, as pgbench starts its runs: a
# server with autovacuum off otherwise hands each run the dead rows of all
# the runs before it. No CHECKPOINT: right after one, every first change of
# a page writes the whole page to the WAL, and a short run spent entirely in
# that phase measured a quarter fewer NOPM at 1 user than one that was not.
for r in $(seq "$rounds"); do
  for u in $users; do
    psql -qAt -h "$host" -p "$port" -U "$user" -d "$dbname" -c "VACUUM"
    "$sb" -q --json tpcc run --db "$db" --users "$u" --rampup "${rampup}s" --duration "${duration}s" > "$work/run.json"
    field nopm.districts < "$work/run.json" >> "$work/nopm.$u"
    field tpm.server < "$work/run.json" >> "$work/tpm.$u"
    # Driver CPU: storbench's own user and system time over the measured
    # window, per transaction of the window (recorded by the run itself).
    field driver.cpu.user_per_txn < "$work/run.json" >> "$work/cpuu.$u"
    field driver.cpu.sys_per_txn < "$work/run.json" >> "$work/cpus.$u"
  done
done
printf "%6s %10s %10s %14s %10s %22s\n" users NOPM TPM "NOPM/HammerDB" "TPM/user" "driver µs/txn usr+sys"
for u in $users; do
  nopm=$(median < "$work/nopm.$u"); tpm=$(median < "$work/tpm.$u")
  cu=$(median < "$work/cpuu.$u"); cs=$(median < "$work/cpus.$u")
  r=${ref[$u]:-0}
  python3 -c "print(f'{$u:>6} {$nopm:>10,.0f} {$tpm:>10,.0f} {($nopm/$r if $r else float(\"nan\")):>14.2f} {$tpm/$u:>10,.0f} {$cu+$cs:>10.1f} ({$cu:.1f}+{$cs:.1f})')"
done

# The floor under any driver's CPU per transaction on this machine: pgbench's
# own CPU per one-statement transaction (-S, prepared, 1 client) — one
# blocking round trip, nearly all of it the kernel's wake-ups.
if command -v pgbench >/dev/null; then
  scratch=${dbname}_floor
  PGOPTIONS="-c client_min_messages=warning" psql -q -h "$host" -p "$port" -U "$user" -d postgres -c "DROP DATABASE IF EXISTS $scratch" -c "CREATE DATABASE $scratch"
  pgbench -q -i -s 1 -h "$host" -p "$port" -U "$user" "$scratch" >/dev/null 2>&1
  /usr/bin/time -f "%U %S" -o "$work/time" pgbench -n -S -M prepared -c 1 -T 10 -h "$host" -p "$port" -U "$user" "$scratch" > "$work/pgb.out" 2>&1
  n=$(awk '/number of transactions actually processed/ {print $NF}' "$work/pgb.out")
  read -r cu cs < "$work/time"
  python3 -c "print(f'pgbench -S -c 1 (one round trip per txn): {($cu+$cs)/$n*1e6:.1f} µs/txn client CPU ({$cu/$n*1e6:.1f} user + {$cs/$n*1e6:.1f} sys)')"
  psql -q -h "$host" -p "$port" -U "$user" -d postgres -c "DROP DATABASE IF EXISTS $scratch"
  # The same floor for a round trip as long as a TPC-C one: pgbench calling
  # storbench's New-Order function on the benchmark's own database (simple
  # protocol: its array literals defeat pgbench's -M prepared).
  /usr/bin/time -f "%U %S" -o "$work/time" pgbench -n -M simple -f "$here/bench/tpcc-neword.pgbench" -c 1 -T 10 \
    -h "$host" -p "$port" -U "$user" "$dbname" > "$work/pgb.out" 2>&1
  n=$(awk '/number of transactions actually processed/ {print $NF}' "$work/pgb.out")
  [ "${n:-0}" -gt 0 ] || { echo "pgbench New-Order calls failed:" >&2; cat "$work/pgb.out" >&2; exit 1; }
  read -r cu cs < "$work/time"
  python3 -c "print(f'pgbench New-Order calls -c 1 (one round trip per txn): {($cu+$cs)/$n*1e6:.1f} µs/txn client CPU ({$cu/$n*1e6:.1f} user + {$cs/$n*1e6:.1f} sys)')"
fi
