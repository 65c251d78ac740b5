#!/usr/bin/env bash
# The I/O runner's own cost: storbench io --engine null against fio --ioengine=null
# (neither touches a device; every I/O completes at once), one thread, 4 KiB random
# reads, alternately, at each queue depth. The figure is I/Os per second per core:
# IOPS divided by the CPU the process used (user + system, over the run), so a busy
# machine's stolen time does not count against either. fio is run three ways:
#
#   fio-default  fio --ioengine=null as most people run it (a process per job, random map)
#   fio-best     fio's fastest settings for null that still time every I/O:
#                --thread --norandommap --randrepeat=0, and at QD > 1
#                --iodepth_batch_submit=QD --iodepth_batch_complete_min=1
#   fio-nolat    fio-best plus --gtod_reduce=1: no clock read per I/O and no latency
#                figures at all (storbench always times every I/O; shown for scale)
#
# storbench runs its defaults (--norandommap; every I/O timed into a histogram).
# Prints per QD and fio variant the medians of IOPS and IOPS per core and the median
# over the rounds of the ratio storbench/fio of IOPS per core (the goal: >= 1.5).
#
#   flock /tmp/storbench-measure.lock bench/io-null-vs-fio.sh [--duration 5] [--rounds 3] [--qd "1 16 128"]
set -euo pipefail
duration=5; rounds=3; qds="1 16 128"
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration=$2; shift 2;; --rounds) rounds=$2; shift 2;; --qd) qds=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p storbench --manifest-path "$here/Cargo.toml"
export SB="${SB:-${CARGO_TARGET_DIR:-$here/target}/release/storbench}" DURATION="$duration" ROUNDS="$rounds" QDS="$qds"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export STORBENCH_RESULTS="$work/results.db" WORK="$work"
python3 - <<'PY'
import json, os, statistics, subprocess, datetime

sb, dur, rounds = os.environ["SB"], int(os.environ["DURATION"]), int(os.environ["ROUNDS"])
qds = [int(q) for q in os.environ["QDS"].split()]
# The null engine reads nothing, but storbench creates and fills its --target
# once (the first run below, outside the rounds); the span is the same for both.
size = 256 << 20
BEST = ["--thread", "--norandommap", "--randrepeat=0"]

def fio_args(kind, qd):
    a = []
    if kind != "fio-default":
        a += BEST
        if qd > 1:
            a += [f"--iodepth_batch_submit={qd}", "--iodepth_batch_complete_min=1"]
    if kind == "fio-nolat":
        a += ["--gtod_reduce=1"]
    return a

def run_fio(kind, qd):
    args = ["fio", "--name=null", "--ioengine=null", f"--size={size}", "--bs=4k", "--rw=randread",
            f"--iodepth={qd}", "--numjobs=1", "--time_based", f"--runtime={dur}", "--output-format=json"]
    j = json.loads(subprocess.run(args + fio_args(kind, qd), check=True, capture_output=True, text=True).stdout)
    job = j["jobs"][0]
    iops = job["read"]["iops"]
    cores = (job["usr_cpu"] + job["sys_cpu"]) / 100.0
    return iops, iops / cores if cores else float("nan")

def run_sb(qd):
    out = subprocess.run([sb, "-q", "--json", "io", "--engine", "null", "--target", f"{os.environ['WORK']}/null.dat",
                          "--size", str(size), "--bs", "4k", "--rw", "randread", "--qd", str(qd), "--threads", "1",
                          "--duration", f"{dur}s", "--rampup", "0s"], check=True, capture_output=True, text=True).stdout
    m = json.loads(out)["steps"][0]["metrics"]
    v = lambda k: m[k]["value"]
    cpu_us = v("io.cpu.user_per_io") + v("io.cpu.sys_per_io")
    return v("io.iops"), 1e6 / cpu_us if cpu_us else float("nan")

run_sb(1)
kinds = ["fio-default", "fio-best", "fio-nolat"]
med = statistics.median
print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, "
      f"{dur}s per run, {rounds} rounds, load {os.getloadavg()[0]:.1f}, "
      f"{subprocess.run(['fio', '--version'], capture_output=True, text=True).stdout.strip()}")
print(f"{'QD':>4} {'fio run':<12} {'fio IOPS':>10} {'sb IOPS':>10} {'fio /core':>10} {'sb /core':>10} "
      f"{'ratio':>6} {'min-max':>11}")
for qd in qds:
    r = {k: [] for k in kinds}
    for n in range(rounds):
        # Alternate, and who goes first swaps every round.
        for k in kinds:
            if n % 2 == 0:
                a = run_fio(k, qd); b = run_sb(qd)
            else:
                b = run_sb(qd); a = run_fio(k, qd)
            r[k].append((a, b))
    for k, xs in r.items():
        ratios = [b[1] / a[1] for a, b in xs]
        print(f"{qd:>4} {k:<12} {med([a[0] for a, _ in xs]):>10.0f} {med([b[0] for _, b in xs]):>10.0f} "
              f"{med([a[1] for a, _ in xs]):>10.0f} {med([b[1] for _, b in xs]):>10.0f} "
              f"{med(ratios):>6.2f} {min(ratios):>5.2f}-{max(ratios):<5.2f}")
PY
