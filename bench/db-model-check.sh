#!/usr/bin/env bash
# A device model against the device it was fitted to, at the database level,
# with nothing of the emulator's between (issue 25). Each round calibrates
# this machine's disk afresh (`media calibrate --quick`, a file on --dir's
# filesystem: the disk moves ±10-25 % within minutes, so a model fitted once
# is held against a device that is no longer the one it measured), then
# runs SQLite TPC-B at 1 and 8 clients and TPC-C at 1 and 4 users on that
# filesystem (the device) and beside it with the round's model under the
# files in process (`sqlite:…?model=disk.toml`: the model's syncs stand
# for the disk's, so the two sides differ in the sync alone), the device
# first in odd rounds and last in even ones. Prints each side's median per
# step and the model's error against the device (goal: ≤ 10 %).
#
# `media validate --db-check` runs the same comparison once, beside the FUSE
# medium, with the model it is given.
#
#   bench/db-model-check.sh [--rounds 3] [--time 20s] [--dir /work]
#
# Runs under flock /tmp/storbench-measure.lock (exclusive).
set -euo pipefail
. "$(dirname "$0")/emu-common.sh"
measure_locked "$@"
rounds=3; t=20s; dir=/work
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2;; --time) t=$2; shift 2;; --dir) dir=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
emu_setup
probe="$dir/storbench-dbmodel-$$.dat"; real="$dir/storbench-dbmodel-$$"; mem="$dir/storbench-dbmodel-$$-model"
cleanup() { rm -rf "$probe" "$real" "$mem" "$work"; }
trap cleanup EXIT
mkdir -p "$real" "$mem"
echo "== $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
url() { # side file
  if [ "$1" = device ]; then echo "sqlite:$real/$2"; else echo "sqlite:$mem/$2?model=$work/disk.toml"; fi
}
for d in "$real" "$mem"; do # built without a model: the model is the runs'
  "$SB" -q tpcb init --db "sqlite:$d/b.db" --scale 1 >/dev/null
  "$SB" -q tpcc build --db "sqlite:$d/c.db" --warehouses 1 >/dev/null
done
figs() { # figure: one "label value" line per step of the JSON run record on stdin
  python3 -c 'import json,sys; d=json.load(sys.stdin)
for s in d["steps"]: print(s["label"], s["metrics"][sys.argv[1]]["value"])' "$1"
}
out="$work/figs.txt"
for r in $(seq 1 "$rounds"); do
  "$SB" -q media calibrate "$probe" --size 2G --family ssd --out "$work/disk.toml" --quick | tail -n 1
  rm -f "$probe"
  echo "round $r model: $(grep -E '^(read|write|flush) = "[0-9.]+us"' "$work/disk.toml" | tr '\n' ' ')"
  order="device model"; [ $((r % 2)) -eq 0 ] && order="model device"
  for side in $order; do
    "$SB" -q --json tpcb run --db "$(url $side b.db)" --clients 1,8 --duration "$t" 2>>"$work/runs.log" | figs tps | sed "s/^/$side TPC-B_TPS /" >> "$out"
    "$SB" -q --json tpcc run --db "$(url $side c.db)" --users 1,4 --duration "$t" --rampup 5s 2>>"$work/runs.log" | figs nopm.districts | sed "s/^/$side TPC-C_NOPM /" >> "$out"
    sync -f "$real" # the model side's files are never synced: their writeback not in the next runs
  done
  echo "round $r done ($(date -u +%T))"
done
python3 - "$out" <<'PY'
import sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    side, what, step, v = line.split()
    rows.setdefault((what, step), {}).setdefault(side, []).append(float(v))
errs = []
print(f"{'step':<28} {'device (runs)':<34} {'model in process (runs)':<34} {'median':>14} {'error':>8}")
for (what, step), s in rows.items():
    d, m = st.median(s["device"]), st.median(s["model"])
    e = (m - d) / d * 100
    errs.append(abs(e))
    runs = lambda v: "/".join(f"{x:.0f}" for x in v)
    print(f"{what + ' ' + step:<28} {runs(s['device']):<34} {runs(s['model']):<34} {d:>6.0f}/{m:<7.0f} {e:>+7.1f}%")
print(f"median |error| over the {len(errs)} steps: {st.median(errs):.1f}% (goal <= 10 %)")
PY
