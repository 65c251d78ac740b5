#!/usr/bin/env bash
# Calibrate this machine's disk and check the fit (issue 25):
#  1. `media calibrate` on a file on /work's filesystem (direct I/O, our io
#     engine), family ssd (the disk here is a virtual one on flash);
#  2. `media validate` of that model against the same file: the model is
#     emulated on a medium and the grid runs on both in alternating rounds;
#     per cell IOPS, mean, p50, p99 of both, and the median |error| over
#     the cells inside the emulator's envelope (goal: ≤ 10 % each);
#  3. the held-out check for tables: every table in models/tables/*.csv (or
#     bench/data/example-ssd-table.csv) fitted on half its rows, the error
#     on the other half.
#
#   bench/emu-calibrate.sh [--grid quick|default] [--rounds 2] [--size 2G] [--dir /work] [--no-db]
#
# With the database check (default): TPC-B at 1 and 8 clients and TPC-C at
# 1 and 4 users, SQLite on /work's filesystem, on an ext4 on the emulated
# model and beside the first with the model in process (`sqlite:…?model=`),
# 20 s steps (goal: ≤ 10 % on TPS and NOPM).
#
# Runs under flock /tmp/storbench-measure.lock (exclusive).
set -euo pipefail
. "$(dirname "$0")/emu-common.sh"
measure_locked "$@"
grid=quick; rounds=2; size=2G; dir=/work; db=--db-check
while [ $# -gt 0 ]; do
  case "$1" in
    --grid) grid=$2; shift 2;; --no-db) db=""; shift;; --rounds) rounds=$2; shift 2;; --size) size=$2; shift 2;; --dir) dir=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
emu_setup
probe="$dir/storbench-calibrate-$$.dat"
cleanup() {
  "$SB" -q media destroy --all >/dev/null 2>&1 || true
  rm -f "$probe"
  rm -rf "$work"
}
trap cleanup EXIT
quick=""; [ "$grid" = quick ] && quick=--quick
echo "== $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== calibrate: $SB media calibrate $probe --size $size --family ssd $quick"
t0=$(date +%s)
"$SB" media calibrate "$probe" --size "$size" --family ssd --out "$work/disk.toml" $quick
echo "calibrate took $(( $(date +%s) - t0 )) s"
sed -n '/^\[sources\]/,/^\[/p' "$work/disk.toml" | head -20
echo "== validate: $SB media validate disk.toml --against $probe --size $size $quick --rounds $rounds $db --db-time 20s"
t0=$(date +%s)
"$SB" media validate "$work/disk.toml" --against "$probe" --size "$size" $quick --rounds "$rounds" $db --db-time 20s
echo "validate took $(( $(date +%s) - t0 )) s"
sed -n '/^\[validation\]/,$p' "$work/disk.toml"
echo "== held-out check for tables"
tables=("$here"/models/tables/*.csv)
[ -e "${tables[0]}" ] || tables=("$here/bench/data/example-ssd-table.csv")
for t in "${tables[@]}"; do
  fam=ssd
  case "$(basename "$t")" in *hdd*|*disk*) fam=hdd;; *nas*|*nfs*|*san*|*net*) fam=net;; esac
  echo "-- $t ($fam)"
  "$SB" -q media calibrate --from-table "$t" --family "$fam" --holdout --out "$work/t.toml" | tail -1 || true
done
