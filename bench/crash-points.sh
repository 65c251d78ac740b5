#!/usr/bin/env bash
# Crash points per minute on a managed PostgreSQL (issue #29's goal: at
# least 20 a minute at TPC-C scale 1), and where a point's time goes: making
# its image from the write journal, mounting it (ext4's journal replay),
# PostgreSQL's start and crash recovery, the checks (rows, amcheck) and the
# cleanup. The database holds a TPC-C build of --warehouses (0: none) so the
# data directory has a realistic size; the crash points are those of
# --workload (`durability --crash-points --workload`: tpcc, the default,
# runs TPC-C on that build and checks `tpcc check` on every point; rows the
# numbered-row workload) run for --run.
#
#   bench/crash-points.sh [--points 12|all] [--run 5s] [--warehouses 1] [--clients 2] [--workload tpcc|rows] [--jobs N]
#
# --jobs: points recovered at once (durability --jobs; default: its own,
# the CPUs up to 4). Points a minute are over the wall time the points
# took together; the phases are each point's own, summed over the jobs.
#
# --points all on TPC-C: every point, through the WAL-extent reduction
# (docs/durability.md): the points it covers, the ones it recovers.
# Progress is a summary (bench/crash-progress.py), not a line per point.
#
# Takes the measurement lock exclusively; $SB picks the binary (default: a
# release build).
set -euo pipefail
. "$(dirname "$0")/emu-common.sh"
measure_locked "$@"
points=12; run=5s; wh=1; clients=2; workload=tpcc; jobs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --points) points=$2; shift 2;; --run) run=$2; shift 2;;
    --warehouses) wh=$2; shift 2;; --clients) clients=$2; shift 2;;
    --workload) workload=$2; shift 2;;
    --jobs) jobs=(--jobs "$2"); shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
emu_setup
cleanup() {
  "$SB" -q pg down --all --destroy >/dev/null 2>&1 || true
  "$SB" -q media destroy --all >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
chmod 755 "$work"
"$SB" -q media create crashbench --size 1G --fs ext4 --model sata-ssd --record
"$SB" -q pg up crashbench-pg --data crashbench -c shared_buffers=64MB
if [ "$wh" -gt 0 ]; then
  t0=$(date +%s.%N)
  "$SB" -q tpcc build --db managed:crashbench-pg --warehouses "$wh"
  echo "TPC-C build, $wh warehouse(s): $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
fi
echo "data directory: $(du -sh "$STORBENCH_STATE/mnt/crashbench" | cut -f1), journal: $(du -sh "$STORBENCH_STATE/emu/crashbench.journal" | cut -f1)"
sleep 3   # past the model's destage window
t0=$(date +%s.%N)
# Its stderr (a line per point) summed up by crash-progress.py: a line per
# tenth of the points or per minute; the JSON goes to the file.
"$SB" --json durability --db managed:crashbench-pg --medium crashbench --clients "$clients" --workload "$workload" \
  --cut-after "$run" --crash-points "$points" --cache honest "${jobs[@]}" 2>&1 > "$work/out.json" \
  | python3 -u "$(dirname "$0")/crash-progress.py" >&2 || true
wall=$(python3 -c "print($(date +%s.%N) - $t0)")
python3 - "$work/out.json" "$wall" "$run" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); wall = float(sys.argv[2])
for c in d["cells"]:
    s = c["seconds_per_point"]
    if c.get("predicted"):
        print(f"{c['setting'] or 'default'} / {c['cache']}: {c['points']} points: {c['predicted']} checked by WAL extent, "
              f"{c['tried']} recovered (of {c['to_recover']} chosen: {c['states']} non-WAL states, the rest a spread), "
              f"{c['disagreed']} disagreed; points losing {c['points_losing']}")
    print(f"{c['setting'] or 'default'} / {c['cache']}: {c['tried']} of {c['points']} points recovered, "
          f"{c['acknowledged']} {'New-Orders' if d.get('workload') == 'tpcc' else 'rows'} acknowledged, lost max {c['lost_max']}, inconsistent {c['inconsistent']}, failed {c['failed']}")
    print(f"  {60 / s['wall']:.1f} points/min ({s['wall']:.2f} s of wall time a point, jobs {d.get('jobs', 1)}); "
          f"a point's own {s['total']:.2f} s (image {s['image']:.2f}, mount {s['mount']:.2f}, recovery {s['recover']:.2f}, "
          f"checks {s['check']:.2f}, cleanup {s['cleanup']:.2f})")
print(f"whole command {wall:.1f} s (the run itself included)")
PY
