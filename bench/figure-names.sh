#!/usr/bin/env bash
# The "no behaviour change" guard of issue 23: runs a small plan (io, TPC-B,
# TPC-C and TPC-H on embedded SQLite, ~2 s steps) plus the direct verbs, and
# prints every run record's figure names and units (metrics(name, unit)) and
# per-second series names (samples) by run kind, sorted. Machine-specific
# parts (device names) are normalised and the system monitor's device, CPU
# and pressure figures left out, so the list depends on the code only. Not a
# measurement: nothing here is timed.
#
#   bench/figure-names.sh [BIN]            # prints the list
#   bench/figure-names.sh --check [BIN]    # diffs it against bench/figure-names.txt (exit 1 on a difference)
#
# BIN defaults to target/debug/storbench (built by `cargo build -p storbench`).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
check=
if [ "${1:-}" = --check ]; then check=1; shift; fi
sb=${1:-$here/target/debug/storbench}
sb=$(cd "$(dirname "$sb")" && pwd)/$(basename "$sb")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export STORBENCH_RESULTS="$work/results.db"
cd "$work"
cat > plan.toml <<'PLAN'
name = "figure-names"
[target.data]
path = "./data"
[[workload]]
kind = "io"
run = { target = "{target}/io.dat", size = "16M", set = "quick", duration = "1s" }
[[workload]]
kind = "tpcb"
init = { scale = 1 }
run = { db = "sqlite:{target}/tpcb.db", clients = "1,2", duration = "2s" }
[[workload]]
kind = "tpcc"
init = { warehouses = 1 }
run = { db = "sqlite:{target}/tpcc.db", users = "1", rampup = "1s", duration = "2s" }
PLAN
{
  "$sb" run plan.toml --quiet --no-report
  "$sb" tpcb init --db sqlite:data/b2.db --scale 1 --quiet
  "$sb" tpcb run --db sqlite:data/b2.db --clients 2 --duration 2s --quiet
  "$sb" tpch build --db sqlite:data/h.db --scale 0.01 --quiet
  "$sb" tpch run --db sqlite:data/h.db --test both --quiet
} >"$work/out.log" 2>&1 || { cat "$work/out.log" >&2; exit 1; }
list() {
  sqlite3 "$STORBENCH_RESULTS" "
    SELECT DISTINCT r.kind || ' metric ' || m.name || ' ' || m.unit FROM metrics m JOIN runs r ON r.id = m.run_id
    UNION
    SELECT DISTINCT r.kind || ' sample ' || s.name FROM samples s JOIN runs r ON r.id = s.run_id
    UNION
    SELECT DISTINCT r.kind || ' status ' || r.status FROM runs r;" |
    sed -E 's/ (dev|bdi)\.[^. ]+\./ \1.DEV./; s/ cpu[0-9]+\./ cpuN./' |
    # The system monitor's device, CPU and pressure figures come and go with
    # what ran in those seconds (r_await only when it read, none under 1 s).
    # TPC-C's rolled-back New-Orders (1 % of them) exist only when one fell in
    # the 2 s step.
    grep -Ev ' (dev|psi|cpu)\.| txn\.new_order_rollback\.' | LC_ALL=C sort -u
}
if [ -n "$check" ]; then
  list > "$work/now.txt"
  diff -u "$here/bench/figure-names.txt" "$work/now.txt"
else
  list
fi
