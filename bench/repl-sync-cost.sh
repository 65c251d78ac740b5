#!/usr/bin/env bash
# What synchronous commit costs one client over a delayed link: a managed
# primary with one standby behind storbench's delay proxy; pgbench (the
# reference) and storbench's TPC-B alternately at synchronous_commit=local and
# =on, per RTT; prints median TPS of each and the model for one client,
# 1 / (t_local + RTT + t_standby_flush), with t_standby_flush taken as t_local
# (same disk). Run under the measurement lock:
#
#   flock /tmp/storbench-measure.lock bench/repl-sync-cost.sh [--rtts "1ms 5ms"] [--duration 15] [--rounds 3]
#
# The instance lives in a scratch state directory and is destroyed at the end.
set -euo pipefail
rtts="0.2ms 1ms 5ms"; duration=15; rounds=3; scale=10
while [ $# -gt 0 ]; do
  case "$1" in
    --rtts) rtts=$2; shift 2;; --duration) duration=$2; shift 2;;
    --rounds) rounds=$2; shift 2;; --scale) scale=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
. "$(dirname "$0")/common.sh"
export STORBENCH_STATE="$work/state"
chmod 755 "$work"
trap '"$sb" -q pg down --all --destroy >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
echo "1 client, scale $scale, ${duration}s per run, $rounds rounds, $(nproc) CPUs, $(date -u +%F)"
printf "%7s %6s %10s %10s %10s %8s\n" rtt sync pgbench storbench model sb/model
for rtt in $rtts; do
  "$sb" -q pg down --all --destroy >/dev/null 2>&1 || true
  rm -rf "$work/pd" "$work/pd-s1"
  "$sb" -q pg up b --data "$work/pd" --standby 1 --sync on --link "rtt=$rtt" >/dev/null
  port=$("$sb" --json pg status b | sed -n 's/^  "port": \([0-9]*\),/\1/p')
  q() { psql -qAt -h 127.0.0.1 -p "$port" -U root -d storbench -c "$1" >/dev/null; }
  "$sb" -q tpcb init --db managed:b --scale "$scale"
  for level in local on; do : > "$work/pg.$level"; : > "$work/sb.$level"; done
  for r in $(seq "$rounds"); do
    for level in local on; do
      q "ALTER SYSTEM SET synchronous_commit = '$level'"; q "SELECT pg_reload_conf()"
      pgbench -n -c 1 -T "$duration" -h 127.0.0.1 -p "$port" -U root storbench 2>/dev/null \
        | sed -n 's/^tps = \([0-9.]*\).*/\1/p' >> "$work/pg.$level"
      "$sb" --json -q tpcb run --db managed:b --clients 1 --duration "${duration}s" \
        | grep -A2 '"tps"' | sed -n 's/.*"value": \([0-9.]*\).*/\1/p' | head -1 >> "$work/sb.$level"
    done
  done
  local_sb=$(median < "$work/sb.local")
  rtt_s=$(awk -v r="$rtt" 'BEGIN { v = r + 0; if (r ~ /ms$/) v /= 1000; print v }')
  model=$(awk -v l="$local_sb" -v r="$rtt_s" 'BEGIN { printf "%.1f", 1 / (2 / l + r) }')
  for level in local on; do
    pg=$(median < "$work/pg.$level"); s=$(median < "$work/sb.$level")
    if [ "$level" = on ]; then m=$model; ratio=$(awk -v a="$s" -v b="$model" 'BEGIN { printf "%.2f", a / b }'); else m=-; ratio=-; fi
    printf "%7s %6s %10s %10s %10s %8s\n" "$rtt" "$level" "$pg" "$s" "$m" "$ratio"
  done
done
