#!/usr/bin/env bash
# What SQLite's timing VFS costs, in instructions (issue 28's 1 % goal):
# storbench's TPC-B on SQLite under callgrind, with the shim (and the
# wait sampler, as a user runs it) and without it (`?timing=off`), and the
# instructions per transaction of the thread that runs the transactions,
# plus the shim's own functions (crates/db/src/vfs.rs) per transaction.
# Instruction counts do not move with the host's load, so this resolves
# the cost to a fraction of a per cent where TPS on this host (±10 % a
# round, bench/sqlite-vfs-cost.sh) does not. Part of the difference is
# not the shim: the two runs leave SQLite's tables and WAL in different
# states (B-tree page splits, WAL index size), which the per-function
# table shows.
#   bench/sqlite-vfs-instructions.sh [--sync off|normal|full] [--duration 20] [--dir DIR]
set -euo pipefail
sync=off; duration=20; dir=/var/tmp
while [ $# -gt 0 ]; do
  case "$1" in
    --sync) sync=$2; shift 2;; --duration) duration=$2; shift 2;; --dir) dir=$2; shift 2;;
    *) echo "unknown option $1 (allowed: --sync --duration --dir)" >&2; exit 2;;
  esac
done
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/onoff.sh"   # builds/finds $SB
work=$(mktemp -d "$dir/sqlite-vfs-ir.XXXXXX")
trap 'rm -rf "$work"' EXIT
export STORBENCH_RESULTS="$work/results.db"
db="sqlite:$work/tpcb.db?synchronous=$sync"
"$SB" -q tpcb init --db "$db" --scale 1 >/dev/null
echo "SQLite TPC-B synchronous=$sync, scale 1, 1 client, ${duration}s under callgrind each; $(date -u '+%F %T') UTC"
for m in ${ORDER:-on off}; do
  url=$db; [ $m = off ] && url="$db&timing=off"
  n=$(valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$work/cg.$m.%p" \
      "$SB" --json -q tpcb run --db "$url" --clients 1 --duration "${duration}s" 2>/dev/null \
    | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["steps"][0]["metrics"]["txn.count"]["value"]))')
  echo "$m $n" >> "$work/n"
done
WORK=$work python3 - <<'PY'
import glob, os, re, subprocess
work = os.environ["WORK"]
n = dict(l.split() for l in open(f"{work}/n"))
def worker(mode):
    # The thread with the most instructions is the one running the transactions.
    best = None
    for f in glob.glob(f"{work}/cg.{mode}.*-*"):
        ir = next((int(l.split()[1]) for l in open(f) if l.startswith("totals:") or l.startswith("summary:")), 0)
        best = max(best or (0, f), (ir, f))
    return best
def shim(f):
    out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", f], capture_output=True, text=True).stdout
    total = 0
    for line in out.splitlines():
        if line.startswith("-- Auto-annotated"): break
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S.*)$", line)
        if m and "storbench_db::vfs::" in m.group(2) or (m and "db/src/vfs.rs" in m.group(2)):
            total += int(m.group(1).replace(",", ""))
    return total
(on_ir, on_f), (off_ir, off_f) = worker("on"), worker("off")
on_n, off_n = int(n["on"]), int(n["off"])
a, b = on_ir / on_n, off_ir / off_n
s = shim(on_f) / on_n
print(f"instructions per transaction, the transactions' thread: on {a:,.0f} ({on_n} txns), off {b:,.0f} ({off_n} txns): on/off {a / b:.4f}")
print(f"the shim's own functions (vfs.rs, inlined parts included): {s:,.0f} a transaction = {s / b * 100:.2f} % of the off run's")
PY
