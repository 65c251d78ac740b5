#!/usr/bin/env bash
# storbench io versus fio, alternately on the same file with the same profile:
# each of the sqlserver-six profiles, plus 4 KiB random reads at QD1 and at
# QD128 on one thread. Prints per profile the median over the rounds of the
# ratio storbench/fio of IOPS, of p99 latency (submission to completion, fio's
# lat percentiles) and of CPU time per I/O (user + system of the whole process).
#
#   bench/io-vs-fio.sh [--file PATH] [--size 2G] [--duration 10] [--rounds 3] [--profiles "read-random-8k qd1 qd128"]
#
# Both use io_uring with direct I/O, registered files and fixed buffers.
set -euo pipefail
file=./storbench-data/bench-io.dat; size=2G; duration=10; rounds=3; only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --file) file=$2; shift 2;; --size) size=$2; shift 2;; --duration) duration=$2; shift 2;;
    --rounds) rounds=$2; shift 2;; --profiles) only=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p storbench --manifest-path "$here/Cargo.toml"
export SB="$here/target/release/storbench" FILE="$file" SIZE="$size" DURATION="$duration" ROUNDS="$rounds" ONLY="$only"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export STORBENCH_RESULTS="$work/results.db" WORK="$work"
# Create and fill the file once (storbench fills it with incompressible data).
"$SB" -q io --target "$file" --size "$size" --bs 4k --rw randread --duration 1s --rampup 0s >/dev/null
python3 - <<'PY'
import json, os, statistics, subprocess, datetime

sb, f, size, dur, rounds = os.environ["SB"], os.environ["FILE"], os.environ["SIZE"], int(os.environ["DURATION"]), int(os.environ["ROUNDS"])
only = os.environ["ONLY"].split()
K = 1024
# name: (bs, rw, qd, threads, storbench args)
profiles = {
    "read-random-8k": (8 * K, "randread", 8, 8, ["--profile", "read-random-8k"]),
    "read-random-64k": (64 * K, "randread", 8, 8, ["--profile", "read-random-64k"]),
    "write-random-8k": (8 * K, "randwrite", 8, 8, ["--profile", "write-random-8k"]),
    "read-seq-64k": (64 * K, "read", 8, 8, ["--profile", "read-seq-64k"]),
    "write-seq-8k": (8 * K, "write", 8, 8, ["--profile", "write-seq-8k"]),
    "read-seq-256k": (256 * K, "read", 8, 8, ["--profile", "read-seq-256k"]),
    "qd1": (4 * K, "randread", 1, 1, ["--bs", "4k", "--rw", "randread", "--qd", "1", "--threads", "1"]),
    "qd128": (4 * K, "randread", 128, 1, ["--bs", "4k", "--rw", "randread", "--qd", "128", "--threads", "1"]),
}
fsize = os.path.getsize(f)

def run_fio(bs, rw, qd, threads):
    args = ["fio", "--name=bench", f"--filename={f}", "--ioengine=io_uring", "--direct=1", f"--bs={bs}",
            f"--rw={rw}", f"--iodepth={qd}", f"--numjobs={threads}", "--thread", "--group_reporting",
            "--time_based", f"--runtime={dur}", "--ramp_time=0", "--registerfiles", "--fixedbufs",
            "--lat_percentiles=1", "--norandommap", "--randrepeat=0", "--output-format=json"]
    if rw in ("read", "write"):
        # One stripe per thread, as storbench does.
        per = fsize // threads // bs * bs
        args += [f"--size={per}", f"--offset_increment={per}"]
    else:
        args += [f"--size={fsize}"]
    j = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    job = j["jobs"][0]
    ios = job["read"]["total_ios"] + job["write"]["total_ios"]
    iops = job["read"]["iops"] + job["write"]["iops"]
    side = job["read"] if job["read"]["total_ios"] else job["write"]
    p99 = side["lat_ns"]["percentile"]["99.000000"] / 1000.0
    cpu_s = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * job["job_runtime"] / 1000.0
    return iops, p99, cpu_s / max(ios, 1) * 1e6

def run_sb(extra):
    out = subprocess.run([sb, "-q", "--json", "io", "--target", f, "--size", str(fsize), "--duration", f"{dur}s",
                          "--rampup", "0s"] + extra, check=True, capture_output=True, text=True).stdout
    m = json.loads(out)["steps"][0]["metrics"]
    v = lambda k: m[k]["value"]
    return v("io.iops"), v("io.lat.p99"), v("io.cpu.user_per_io") + v("io.cpu.sys_per_io")

print(f"{datetime.date.today()}, {os.cpu_count()} CPUs, {f} ({fsize >> 20} MiB), {dur}s per run, {rounds} rounds, "
      f"{subprocess.run(['fio', '--version'], capture_output=True, text=True).stdout.strip()}")
print(f"{'profile':<16} {'fio IOPS':>10} {'sb IOPS':>10} {'IOPS':>6} {'fio p99':>9} {'sb p99':>9} {'p99':>6} {'fio CPU':>8} {'sb CPU':>8} {'CPU':>6}")
for name, (bs, rw, qd, threads, extra) in profiles.items():
    if only and name not in only:
        continue
    r = []
    for _ in range(rounds):
        fi = run_fio(bs, rw, qd, threads)
        s = run_sb(extra)
        r.append((fi, s))
    med = lambda xs: statistics.median(xs)
    fi_iops, sb_iops = med([a[0] for a, _ in r]), med([b[0] for _, b in r])
    fi_p99, sb_p99 = med([a[1] for a, _ in r]), med([b[1] for _, b in r])
    fi_cpu, sb_cpu = med([a[2] for a, _ in r]), med([b[2] for _, b in r])
    ratio = lambda i: med([b[i] / a[i] if a[i] else float("nan") for a, b in r])
    print(f"{name:<16} {fi_iops:>10.0f} {sb_iops:>10.0f} {ratio(0):>6.3f} {fi_p99:>8.0f}u {sb_p99:>8.0f}u {ratio(1):>6.3f} "
          f"{fi_cpu:>7.2f}u {sb_cpu:>7.2f}u {ratio(2):>6.3f}")
PY
