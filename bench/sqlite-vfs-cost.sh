#!/usr/bin/env bash
# What SQLite's timing VFS costs (issue 28: SQLite's wait events are its
# connections' time in the VFS's reads, writes, syncs and busy sleeps, timed
# by a shim over the default VFS): storbench's TPC-B on SQLite with the shim
# (the default URL; the wait sampler on, as a user runs it) and without it
# (`?timing=off`: the default VFS, so no waits are sampled), alternately,
# the order swapped every round so a drift favours neither; prints each
# run's TPS, the median TPS of each, and the median of the per-round ratios
# with/without. Run under the exclusive measurement lock:
#
#   flock /tmp/storbench-measure.lock bench/sqlite-vfs-cost.sh \
#       [--sync full|normal|off] [--scale 1] [--clients 1] [--duration 20] [--rounds 5] [--dir DIR]
#
# --sync off takes the flush out, leaving SQLite CPU-bound: the shim's own
# cost per call shows most there. SB=path/to/storbench takes that binary
# instead of building the release one. The database lives in a temporary
# directory under --dir (default /var/tmp), removed at the end.
set -euo pipefail
sync=full; scale=1; clients=1; duration=20; rounds=5; dir=/var/tmp
while [ $# -gt 0 ]; do
  case "$1" in
    --sync) sync=$2; shift 2;; --scale) scale=$2; shift 2;; --clients) clients=$2; shift 2;;
    --duration) duration=$2; shift 2;; --rounds) rounds=$2; shift 2;; --dir) dir=$2; shift 2;;
    *) echo "unknown option $1 (allowed: --sync --scale --clients --duration --rounds --dir)" >&2; exit 2;;
  esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/onoff.sh"
work=$(mktemp -d "$dir/sqlite-vfs-cost.XXXXXX")
trap 'rm -rf "$work"' EXIT
export STORBENCH_RESULTS="$work/results.db"
db="sqlite:$work/tpcb.db?synchronous=$sync"
"$SB" -q tpcb init --db "$db" --scale "$scale" >/dev/null
# tps MODE: one run's client TPS, with the timing VFS (on) or without (off).
tps() {
  local url=$db; [ "$1" = off ] && url="$db&timing=off"
  "$SB" --json -q tpcb run --db "$url" --clients "$clients" --duration "${duration}s" 2>/dev/null \
    | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["steps"][0]["metrics"]["tps.client"]["value"])'
}
echo "SQLite TPC-B synchronous=$sync, scale $scale, $clients clients, ${duration}s per run, $rounds rounds each, $(nproc) CPUs, $(date -u +%F)"
alternate "$rounds"
