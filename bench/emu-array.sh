#!/usr/bin/env bash
# An array's random reads against N × one member's, on the emulated medium
# (issue 27's goal: up to N × a member's IOPS within 10 % while inside the
# emulator's envelope). RAID 0 of N `constant` members (one unit each, a
# fixed read time: a member serves exactly 1/read IOPS), 4 KiB random reads
# with `storbench io` at queue depth 16 × N (at most 128, the loop device's
# depth), for N = 1, 2, 4, 8 and two member speeds: 2 ms (500 IOPS a
# member, 4,000 for eight: inside the envelope) and 0.2 ms (5,000 a member,
# 40,000 for eight: where the daemon's ceiling shows). With random offsets
# the members' loads are uneven, so a closed loop of K requests over N
# members reaches K/(K+N-1) of N × a member (the "expected" column).
# Rounds alternate the N values; the table gives medians.
#
#   bench/emu-array.sh [--duration 5] [--rounds 3]
#
# Runs under flock /tmp/storbench-measure.lock (measurements never overlap).
set -euo pipefail
. "$(dirname "$0")/emu-common.sh"
measure_locked "$@"
duration=5; rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration=$2; shift 2;; --rounds) rounds=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
emu_setup
trap '"$SB" -q media destroy --all >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
out="$work/iops"
: > "$out"
for r in $(seq 1 "$rounds"); do
  for read in 2ms 200us; do
    for n in 1 2 4 8; do
      name="a$n"
      "$SB" -q media create "$name" --size 1G --fs none --array raid0 --disks "$n" --chunk 64k \
        --member constant --member-set "read=$read" --member-set units=1 >/dev/null
      dev=$("$SB" --json media list | python3 -c "import json,sys; print([m for m in json.load(sys.stdin) if m['name']=='$name'][0]['device'])")
      qd=$((16 * n)); [ "$qd" -gt 128 ] && qd=128
      iops=$("$SB" --json io --target "$dev" --bs 4k --rw randread --qd "$qd" --duration "${duration}s" --rampup 1s \
        | python3 -c 'import json,sys; m=json.load(sys.stdin)["steps"][0]["metrics"]; print(m["io.read.iops"]["value"], m.get("emu.'"$name"'.late",{}).get("value",0))')
      echo "$read $n $qd $iops" >> "$out"
      "$SB" -q media destroy "$name"
    done
  done
done
python3 - "$out" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    read, n, qd, iops, late = line.split()
    rows.setdefault((read, int(n), int(qd)), []).append((float(iops), float(late)))
print(f"{'member read':>11} {'N':>2} {'QD':>4} {'IOPS (median)':>14} {'N x member':>10} {'ratio':>6} {'expected':>8} {'late':>6}")
for (read, n, qd), v in sorted(rows.items(), key=lambda kv: (kv[0][0] != '2ms', kv[0][1])):
    per = 500.0 if read == "2ms" else 5000.0
    med = statistics.median(x for x, _ in v)
    late = statistics.median(l for _, l in v)
    want = per * n
    exp = qd / (qd + n - 1)
    print(f"{read:>11} {n:>2} {qd:>4} {med:>14.0f} {want:>10.0f} {med/want:>6.2f} {exp:>8.2f} {late:>6.0f}")
PY
