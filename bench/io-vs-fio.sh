#!/usr/bin/env bash
# storbench io versus fio, alternately on the same file with the same profile,
# comparing like with like and against fio as most people run it:
#
#   norandommap  storbench (independent random draws, its default)  vs  fio --norandommap
#                (both: threads, io_uring, registered file, fixed buffers)
#   randommap    storbench --randommap (each block once per pass, per thread)  vs  fio's
#                default random map, same engine options
#   fio-default  storbench --randommap  vs  fio with its default options: processes, no
#                registered file or fixed buffers, random map (what "fio --rw=randread" runs)
#
# Sequential profiles have no random map: they run the norandommap pair and fio-default.
# Prints per profile and pair the median over the rounds of the ratio storbench/fio
# of IOPS and of p99 latency (submission to completion, fio's lat percentiles), and
# for the norandommap pair of CPU time per I/O (user + system of the whole process).
#
#   bench/io-vs-fio.sh [--file PATH] [--size 2G] [--duration 10] [--rounds 3] [--profiles "read-random-8k qd1 qd128"]
#
# With --fio-job JOB.fio it runs that job file instead, as it is, through `fio JOB.fio`
# and `storbench io --fio JOB.fio` alternately (the file the job names is filled by
# storbench first), and prints per job the medians of IOPS and p99 (reads' if the job
# reads, else writes') and the median ratio storbench/fio. bench/data/io-vs-fio.fio is one.
#
#   bench/io-vs-fio.sh --fio-job bench/data/io-vs-fio.fio [--rounds 3]
#
# Run it under `flock /tmp/storbench-measure.lock` on a shared machine.
set -euo pipefail
file=./storbench-data/bench-io.dat; size=2G; duration=10; rounds=3; only=""; job=""
while [ $# -gt 0 ]; do
  case "$1" in
    --file) file=$2; shift 2;; --size) size=$2; shift 2;; --duration) duration=$2; shift 2;;
    --rounds) rounds=$2; shift 2;; --profiles) only=$2; shift 2;; --fio-job) job=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p storbench --manifest-path "$here/Cargo.toml"
export SB="${CARGO_TARGET_DIR:-$here/target}/release/storbench" FILE="$file" SIZE="$size" DURATION="$duration" ROUNDS="$rounds" ONLY="$only"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export STORBENCH_RESULTS="$work/results.db" WORK="$work"
if [ -n "$job" ]; then
  export JOB="$job"
  # storbench creates and fills the job's file; fio then finds it at its size.
  "$SB" -q io --fio "$job" --duration 1s --rampup 0s >/dev/null
  python3 - <<'PY'
import json, os, statistics, subprocess, datetime
sb, job, rounds = os.environ["SB"], os.environ["JOB"], int(os.environ["ROUNDS"])

def side(read, write):
    return "read" if read else "write"

def run_fio():
    j = json.loads(subprocess.run(["fio", "--output-format=json", "--lat_percentiles=1", job],
                                  check=True, capture_output=True, text=True).stdout)
    out = {}
    for g in j["jobs"]:
        r, w = g["read"], g["write"]
        s = r if r["total_ios"] else w
        out[g["jobname"]] = (r["iops"] + w["iops"], s["lat_ns"]["percentile"]["99.000000"] / 1000.0)
    return out

def run_sb():
    rec = json.loads(subprocess.run([sb, "-q", "--json", "io", "--fio", job], check=True,
                                    capture_output=True, text=True).stdout)
    out = {}
    for st in rec["steps"]:
        m = st["metrics"]
        v = lambda k: m[k]["value"] if k in m else 0.0
        d = "read" if v("io.read.count") else "write"
        out[st["label"]] = (v("io.iops"), v(f"io.{d}.lat.p99"))
    return out

res = []
for n in range(rounds):
    # Who goes first swaps every round.
    if n % 2 == 0:
        a = run_fio(); b = run_sb()
    else:
        b = run_sb(); a = run_fio()
    res.append((a, b))
med = statistics.median
print(f"{datetime.date.today()}, {os.cpu_count()} CPUs, {job}, {rounds} rounds, "
      f"{subprocess.run(['fio', '--version'], capture_output=True, text=True).stdout.strip()}")
print(f"{'job':<22} {'fio IOPS':>10} {'sb IOPS':>10} {'IOPS':>6} {'fio p99':>9} {'sb p99':>9} {'p99':>6}")
for name in res[0][0]:
    f = [a[name] for a, _ in res]; s = [b[name] for _, b in res]
    ri = med([y[0] / x[0] for x, y in zip(f, s)]); rp = med([y[1] / x[1] for x, y in zip(f, s)])
    print(f"{name:<22} {med([x[0] for x in f]):>10.0f} {med([y[0] for y in s]):>10.0f} {ri:>6.3f} "
          f"{med([x[1] for x in f]):>8.0f}u {med([y[1] for y in s]):>8.0f}u {rp:>6.3f}")
PY
  exit 0
fi
# Create and fill the file once (storbench fills it with incompressible data).
"$SB" -q io --target "$file" --size "$size" --bs 4k --rw randread --duration 1s --rampup 0s >/dev/null
python3 - <<'PY'
import json, os, statistics, subprocess, datetime

sb, f, dur, rounds = os.environ["SB"], os.environ["FILE"], int(os.environ["DURATION"]), int(os.environ["ROUNDS"])
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
TUNED = ["--thread", "--registerfiles", "--fixedbufs"]

def run_fio(bs, rw, qd, threads, opts):
    args = ["fio", "--name=bench", f"--filename={f}", "--ioengine=io_uring", "--direct=1", f"--bs={bs}",
            f"--rw={rw}", f"--iodepth={qd}", f"--numjobs={threads}", "--group_reporting",
            "--time_based", f"--runtime={dur}", "--ramp_time=0", "--lat_percentiles=1",
            "--randrepeat=0", "--output-format=json"] + opts
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

med = statistics.median
print(f"{datetime.date.today()}, {os.cpu_count()} CPUs, {f} ({fsize >> 20} MiB), {dur}s per run, {rounds} rounds, "
      f"{subprocess.run(['fio', '--version'], capture_output=True, text=True).stdout.strip()}")
print(f"{'profile':<16} {'pair':<12} {'fio IOPS':>10} {'sb IOPS':>10} {'IOPS':>6} {'fio p99':>9} {'sb p99':>9} {'p99':>6} {'fio CPU':>8} {'sb CPU':>8} {'CPU':>6}")
for name, (bs, rw, qd, threads, extra) in profiles.items():
    if only and name not in only:
        continue
    rand = rw.startswith("rand")
    # pair: (fio options, storbench extra args)
    pairs = {"norandommap": (TUNED + ["--norandommap"], extra + ["--norandommap"])}
    if rand:
        pairs["randommap"] = (TUNED, extra + ["--randommap"])
    pairs["fio-default"] = ([], extra + (["--randommap"] if rand else []))
    r = {k: [] for k in pairs}
    for n in range(rounds):
        # Alternate: every pair once per round, and who goes first swaps
        # every round (on this VM's disk the second of two back-to-back runs
        # is measurably slower, which a fixed order charges to one tool).
        for k, (fo, so) in pairs.items():
            if n % 2 == 0:
                a = run_fio(bs, rw, qd, threads, fo); b = run_sb(so)
            else:
                b = run_sb(so); a = run_fio(bs, rw, qd, threads, fo)
            r[k].append((a, b))
    for k, xs in r.items():
        ratio = lambda i: med([b[i] / a[i] if a[i] else float("nan") for a, b in xs])
        cell = lambda i: (med([a[i] for a, _ in xs]), med([b[i] for _, b in xs]), ratio(i))
        (fi, si, ri), (fp, sp, rp), (fc, sc, rc) = cell(0), cell(1), cell(2)
        print(f"{name:<16} {k:<12} {fi:>10.0f} {si:>10.0f} {ri:>6.3f} {fp:>8.0f}u {sp:>8.0f}u {rp:>6.3f} "
              f"{fc:>7.2f}u {sc:>7.2f}u {rc:>6.3f}")
PY
