#!/usr/bin/env bash
# Two storbench builds' emulators against this machine's disk (issue 25):
# one model fitted once (`media calibrate --quick`, 2 GiB file on /work),
# then `media validate --quick --rounds 2 --db-check` with each build in
# turn, base, new, base, new; each validate's output is kept in $OUT, and
# bench/emu-lead-cmp.py sets every cell's emulated mean beside the
# model's own prediction (the emulator's error apart from the disk's drift).
#   SB_BASE=/tmp/sb-base SB_NEW=/tmp/sb-new OUT=/tmp/ab flock -x /tmp/storbench-measure.lock bench/emu-lead-ab.sh
set -euo pipefail
SB_BASE=${SB_BASE:?}; SB_NEW=${SB_NEW:?}; out=${OUT:-/tmp/ab}
mkdir -p "$out"
work=$(mktemp -d "$out/w.XXXX"); export STORBENCH_STATE="$work/state" STORBENCH_RESULTS="$work/results.db"
probe=/work/storbench-calibrate-ab.dat
trap '"$SB_NEW" -q media destroy --all >/dev/null 2>&1 || true; rm -f "$probe"; rm -rf "$work"' EXIT
echo "== $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
"$SB_NEW" media calibrate "$probe" --size 2G --family ssd --out "$out/disk.toml" --quick 2>&1 | tail -5
for b in base new base new; do
  sb=$SB_NEW; [ "$b" = base ] && sb=$SB_BASE
  echo "== validate $b $(date -u +%T)"
  "$sb" media validate "$out/disk.toml" --against "$probe" --size 2G --quick --rounds 2 --db-check --db-time 20s \
    > "$out/val-$b-$(date +%H%M).txt" 2>&1
done
echo "== done $(date -u +%T)"
