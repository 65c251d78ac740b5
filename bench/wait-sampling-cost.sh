#!/usr/bin/env bash
# What sampling the database's wait events costs the database (issue 28:
# goal under 1 % of its throughput): storbench's TPC-B on the local
# PostgreSQL with the sampler on (the default, 10 looks a second at
# pg_stat_activity on a connection of its own) and off (--no-wait-events),
# alternately, the order swapped every round so a drift favours neither;
# prints each run's TPS, the median TPS of each, and the median of the
# per-round ratios on/off. Run under the exclusive measurement lock:
#
#   flock /tmp/storbench-measure.lock bench/wait-sampling-cost.sh \
#       [--db URL] [--scale 10] [--clients 4] [--duration 20] [--rounds 5] [--sync-commit on|off]
#
# --sync-commit off (ALTER DATABASE ... SET synchronous_commit = off) takes
# the commit's WAL flush out: the server is then CPU-bound with its data
# cached, and the disk's flush time, which moves TPS ±10 % between runs on
# a shared disk, no longer hides a 1 % cost.
#
# SB=path/to/storbench takes that binary instead of building the release one.
# The database (default waits_bench) is made if missing and dropped at the end.
set -euo pipefail
db=postgres://root@127.0.0.1:5432/waits_bench; scale=10; clients=4; duration=20; rounds=5; sync_commit=on
while [ $# -gt 0 ]; do
  case "$1" in
    --db) db=$2; shift 2;; --scale) scale=$2; shift 2;; --clients) clients=$2; shift 2;;
    --duration) duration=$2; shift 2;; --rounds) rounds=$2; shift 2;; --sync-commit) sync_commit=$2; shift 2;;
    *) echo "unknown option $1 (allowed: --db --scale --clients --duration --rounds --sync-commit)" >&2; exit 2;;
  esac
done
case "$sync_commit" in on|off) ;; *) echo "--sync-commit $sync_commit: not one of on, off" >&2; exit 2;; esac
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/onoff.sh"   # builds/finds $SB
work=$(mktemp -d)
export STORBENCH_RESULTS="$work/results.db"
dbname=${db##*/}; hp=${db#postgres://}; hp=${hp%%/*}; user=${hp%%@*}; hp=${hp#*@}; host=${hp%%:*}; port=${hp##*:}
adm() { PGOPTIONS="-c client_min_messages=warning" psql -qAt -h "$host" -p "$port" -U "$user" -d postgres -c "$1" >/dev/null; }
trap 'adm "DROP DATABASE IF EXISTS $dbname WITH (FORCE)" || true; rm -rf "$work"' EXIT
adm "DROP DATABASE IF EXISTS $dbname WITH (FORCE)"
adm "CREATE DATABASE $dbname"
[ "$sync_commit" = off ] && adm "ALTER DATABASE $dbname SET synchronous_commit = off"
"$SB" -q tpcb init --db "$db" --scale "$scale" >/dev/null
# run MODE: one run's client TPS (pgbench's) and the CPU time per
# transaction, in µs, of the server's process tree (the sampler's own
# backend included when it is on) and of storbench, with the sampler on or
# off; and, sampler on, the sampler's own CPU read directly from /proc
# (its backend's and its storbench thread's schedstat, ns on CPU) between
# 2 s into the run and 1 s before its end, as µs per second of run.
run() {
  local flag=; [ "$1" = off ] && flag=--no-wait-events
  "$SB" --json -q tpcb run --db "$db" --clients "$clients" --duration "${duration}s" $flag > "$work/out.json" 2>/dev/null &
  local sb=$! own=nan
  if [ "$1" = on ]; then
    own=$(SBPID=$sb DUR="$duration" PSQL="psql -qAt -h $host -p $port -U $user -d $dbname" python3 - <<'PY'
import os, subprocess, time, glob
sb = os.environ["SBPID"]; dur = float(os.environ["DUR"])
time.sleep(2)
q = "SELECT pid FROM pg_stat_activity WHERE query LIKE '%pg_stat_get_activity(NULL)%' AND pid <> pg_backend_pid()"
pid = subprocess.run(os.environ["PSQL"].split() + ["-c", q], capture_output=True, text=True).stdout.split()
tid = [t.split("/")[-2] for t in glob.glob(f"/proc/{sb}/task/*/comm") if open(t).read().strip() == "wait-sampler"]
if len(pid) != 1 or len(tid) != 1:
    print("nan"); raise SystemExit
files = [f"/proc/{pid[0]}/schedstat", f"/proc/{sb}/task/{tid[0]}/schedstat"]
ns = lambda: [int(open(f).read().split()[0]) for f in files]
a = ns(); t0 = time.monotonic(); time.sleep(max(dur - 3, 1)); b = ns(); t1 = time.monotonic()
print(f"{(b[0]-a[0])/(t1-t0)/1e3:.1f}/{(b[1]-a[1])/(t1-t0)/1e3:.1f}")
PY
)
  fi
  wait "$sb"
  OWN=$own python3 -c 'import json,sys,os
m=json.load(open(sys.argv[1]))["steps"][0]["metrics"]; v=lambda k: m[k]["value"]
n=v("txn.count"); w=v("window")
busy=(v("server.cpu.percent")+v("driver.cpu.percent"))*1e4   # µs of CPU a second, server and storbench
print(v("tps.client"), v("server.cpu.percent")/100*w/n*1e6, v("driver.cpu.user_per_txn")+v("driver.cpu.sys_per_txn"), os.environ["OWN"], busy)' "$work/out.json"
}
echo "TPC-B scale $scale, $clients clients, synchronous_commit=$sync_commit, ${duration}s per run, $rounds rounds each, $(nproc) CPUs, $(date -u +%F)"
# Alternate as bench/onoff.sh does (the order swapped every round), with
# two readings per round: TPS, and CPU µs per transaction (server + storbench).
# CPU time per transaction is what the sampler adds to the database's work;
# it does not move with the time a run spends waiting, so it resolves a
# 1 % cost where TPS on this shared host (±10 %) does not.
printf "%5s %9s %9s %7s %12s %12s %7s  %s\n" round "on TPS" "off TPS" on/off "on cpu/txn" "off cpu/txn" on/off "sampler's own CPU (backend/thread µs a second, share of the run's CPU)"
: > "$work/r"
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="on off"; else order="off on"; fi
  for m in $order; do read -r t s d o b < <(run "$m"); eval "tps_$m=$t srv_$m=$s drv_$m=$d own_$m=$o busy_$m=$b"; done
  own_b=${own_on%/*}; own_t=${own_on#*/}
  awk -v ob="$own_b" -v ot="$own_t" -v busy="$busy_on" -v r="$r" -v a="$tps_on" -v b="$tps_off" -v sa="$srv_on" -v da="$drv_on" -v sb="$srv_off" -v db="$drv_off" 'BEGIN {
    ca = sa + da; cb = sb + db
    share = (ob + ot) / busy
    printf "%5s %9.1f %9.1f %7.4f %8.1f µs %8.1f µs %7.4f  %.0f/%.0f, %.3f %%   (cpu/txn server %.1f / %.1f, storbench %.1f / %.1f µs)\n", r, a, b, a / b, ca, cb, ca / cb, ob, ot, share * 100, sa, sb, da, db
    print a / b, ca / cb, sa / sb, da / db, share * 100 > "/dev/stderr" }' 2>> "$work/r"
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
t=$(cut -d' ' -f1 "$work/r" | median); c=$(cut -d' ' -f2 "$work/r" | median)
s=$(cut -d' ' -f3 "$work/r" | median); d=$(cut -d' ' -f4 "$work/r" | median); o=$(cut -d' ' -f5 "$work/r" | median)
printf "median on/off: TPS %s (cost %.2f %%); CPU per transaction %s (cost %.2f %%; server %s, storbench %s)\n" \
  "$t" "$(awk -v r="$t" 'BEGIN { print (1 - r) * 100 }')" "$c" "$(awk -v r="$c" 'BEGIN { print (r - 1) * 100 }')" "$s" "$d"
printf "median sampler's own CPU: %s %% of the CPU the run used (server and storbench)\n" "$o"
