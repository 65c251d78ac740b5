#!/usr/bin/env bash
# The wait-event sampler's cost to the database (issue 28: under 1 % of its
# throughput), measured so that a noisy host's drift cancels: one long
# pgbench run (-M prepared, its load the same in every second) while the
# sampler's own look — the same prepared statement storbench's sampler runs
# (crates/db/src/waits.rs, pg_look), 10 times a second on a connection of
# its own, through psql's \watch — is switched on and off in alternate
# blocks of --block seconds. Each on block's TPS is compared with the mean
# of the off blocks either side of it (the first and last second of every
# block are left out: the switch), and the median of those ratios is the
# cost. Beside bench/wait-sampling-cost.sh (storbench on against storbench
# off, whole runs, and the sampler's own CPU read from /proc), this one
# resolves a 1 % effect on a host whose TPS moves ±10 % between runs.
#
#   bench/wait-sampling-interleaved.sh [--db URL] [--scale 10] [--clients 4] [--block 10] [--blocks 21]
#
# synchronous_commit is off in the benchmark database, so the server is
# CPU-bound (a flush-bound server would hide a CPU cost). The database
# (default waits_interleaved) is made and dropped.
set -euo pipefail
db=postgres://root@127.0.0.1:5432/waits_interleaved; scale=10; clients=4; block=10; blocks=21
while [ $# -gt 0 ]; do
  case "$1" in
    --db) db=$2; shift 2;; --scale) scale=$2; shift 2;; --clients) clients=$2; shift 2;;
    --block) block=$2; shift 2;; --blocks) blocks=$2; shift 2;;
    *) echo "unknown option $1 (allowed: --db --scale --clients --block --blocks)" >&2; exit 2;;
  esac
done
[ $((blocks % 2)) = 1 ] && [ "$blocks" -ge 3 ] || { echo "--blocks $blocks: must be odd and at least 3 (off, on, off, ...)" >&2; exit 2; }
[ "$block" -ge 4 ] || { echo "--block $block: at least 4 seconds" >&2; exit 2; }
dbname=${db##*/}; hp=${db#postgres://}; hp=${hp%%/*}; user=${hp%%@*}; hp=${hp#*@}; host=${hp%%:*}; port=${hp##*:}
work=$(mktemp -d); watcher=
adm() { PGOPTIONS="-c client_min_messages=warning" psql -qAt -h "$host" -p "$port" -U "$user" -d postgres -c "$1" >/dev/null; }
cleanup() { [ -n "$watcher" ] && kill "$watcher" 2>/dev/null; adm "DROP DATABASE IF EXISTS $dbname WITH (FORCE)" || true; rm -rf "$work"; }
trap cleanup EXIT
adm "DROP DATABASE IF EXISTS $dbname WITH (FORCE)"
adm "CREATE DATABASE $dbname"
adm "ALTER DATABASE $dbname SET synchronous_commit = off"
pgbench -q -i -s "$scale" -h "$host" -p "$port" -U "$user" "$dbname" >/dev/null 2>&1
oid=$(psql -qAt -h "$host" -p "$port" -U "$user" -d "$dbname" -c "SELECT oid FROM pg_database WHERE datname = current_database()")
# The sampler's look, as storbench prepares it (own pid: the watcher's).
look="SELECT COALESCE(wait_event_type, ''), COALESCE(wait_event, ''), COUNT(*) FROM pg_stat_get_activity(NULL) WHERE datid = $oid AND state = 'active' AND backend_type IN ('client backend', 'parallel worker') AND pid <> pg_backend_pid() GROUP BY 1, 2"
echo "pgbench -M prepared, scale $scale, $clients clients, synchronous_commit=off; sampler look 10/s in alternate ${block}s blocks (off first), $blocks blocks; $(nproc) CPUs, $(date -u '+%F %T') UTC"
pgbench -M prepared -c "$clients" -j "$clients" -T $((block * blocks)) -P 1 -h "$host" -p "$port" -U "$user" "$dbname" \
  > "$work/summary" 2> "$work/progress" &
bench=$!
sleep 0.5   # pgbench connects; its clock starts at its first transaction
for b in $(seq 0 $((blocks - 1))); do
  if [ $((b % 2)) = 1 ]; then
    { printf 'PREPARE look AS %s;\n' "$look"; printf 'EXECUTE look \\watch 0.1\n'; } \
      | psql -qAt -h "$host" -p "$port" -U "$user" -d "$dbname" >/dev/null 2>&1 &
    watcher=$!
    sleep "$block"; kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null || true; watcher=
  else
    sleep "$block"
  fi
done
wait "$bench"
BLOCK=$block BLOCKS=$blocks python3 - "$work/progress" <<'PY'
import os, re, statistics, sys
block, blocks = int(os.environ["BLOCK"]), int(os.environ["BLOCKS"])
per = {}
for line in open(sys.argv[1]):
    m = re.match(r"progress: ([\d.]+) s, ([\d.]+) tps", line)
    if m:
        t = float(m.group(1)); b = int((t - 0.5) // block); k = (t - 0.5) - b * block
        if b < blocks and 1 <= k < block - 1:   # leave out each block's first and last second
            per.setdefault(b, []).append(float(m.group(2)))
mean = {b: statistics.mean(v) for b, v in per.items() if v}
ratios = []
print(f"{'block':>5} {'sampler':>7} {'TPS':>9}  on/off-neighbours")
for b in range(blocks):
    if b not in mean: continue
    r = ""
    if b % 2 == 1 and b - 1 in mean and b + 1 in mean:
        x = mean[b] / ((mean[b - 1] + mean[b + 1]) / 2); ratios.append(x); r = f"{x:.4f}"
    print(f"{b:>5} {'on' if b % 2 else 'off':>7} {mean[b]:>9.1f}  {r}")
on = [mean[b] for b in mean if b % 2]; off = [mean[b] for b in mean if not b % 2]
med = statistics.median(ratios)
q = statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else [min(ratios), med, max(ratios)]
print(f"on blocks {statistics.mean(on):.1f} TPS, off blocks {statistics.mean(off):.1f} TPS (means); "
      f"median on/off {med:.4f} (cost {(1 - med) * 100:.2f} %), quartiles {q[0]:.4f}-{q[-1]:.4f}, {len(ratios)} on blocks")
PY
