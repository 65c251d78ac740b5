#!/usr/bin/env bash
# The daemon's floor: a modelled medium whose model adds nothing
# (--model constant, every time 0) against a plain loop device on the same
# image file, alternately: 4 KiB random reads at QD1, QD16 and QD32, and
# 8 KiB writes with fdatasync at QD1. Prints per workload the medians over
# the rounds of p50 latency (and what the daemon adds), IOPS and their
# ratio, the daemon's CPU time per I/O (user + system of its process,
# from /proc), and the machine's busy CPU per I/O on each path with the
# daemon's user-space share of it (what work in the daemon could save).
# Goals (issue 12): added p50 under 30 µs at QD1; QD16 IOPS at least 0.7×
# the plain loop device's.
#
#   bench/emu-floor.sh [--size 2G] [--duration 10] [--rounds 3]
#
# Runs under flock /tmp/storbench-measure.lock.
set -euo pipefail
. "$(dirname "$0")/emu-common.sh"
measure_locked "$@"
size=2G; duration=10; rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --size) size=$2; shift 2;; --duration) duration=$2; shift 2;; --rounds) rounds=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 2; }
emu_setup
plain=""
cleanup() {
  [ -n "$plain" ] && losetup -d "$plain" 2>/dev/null || true
  "$SB" -q media destroy --all >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
"$SB" -q media create floor --size "$size" --fs none --model constant
read -r dev img pid < <("$SB" --json media list | python3 -c 'import json,sys; m=json.load(sys.stdin)[0]; print(m["device"], m["backing_file"], m["daemon"]["pid"])')
# Fill the image once (through the modelled device), so reads are of real data.
fio --name=fill --filename="$dev" --direct=1 --ioengine=libaio --rw=write --bs=1m --iodepth=8 --size="$size" >/dev/null
# The daemon reads and writes the image through the host's page cache (and
# never syncs it: durability is the model's), so the plain loop device does
# too (--direct-io=off); with direct I/O it would pay the host disk and the
# comparison would flatter the daemon. fdatasync still reaches the host
# disk on the plain loop only, so the write row shows what the daemon does
# not do rather than what it costs.
plain=$(losetup --find --show --direct-io=off "$img")
export DEV="$dev" PLAIN="$plain" PID="$pid" DURATION="$duration" ROUNDS="$rounds"
python3 - <<'PY'
import json, os, statistics, subprocess, datetime

dev, plain, pid = os.environ["DEV"], os.environ["PLAIN"], int(os.environ["PID"])
dur, rounds = int(os.environ["DURATION"]), int(os.environ["ROUNDS"])
tick = os.sysconf("SC_CLK_TCK")

def daemon_cpu():
    """The daemon's (user, system) CPU seconds so far."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) / tick, int(f[12]) / tick

def busy_cpu():
    """CPU seconds the whole machine spent not idle (idle and iowait left out)."""
    c = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(c[:8]) - c[3] - c[4]) / tick

jobs = {
    "randread 4k QD1": ["--rw=randread", "--bs=4k", "--iodepth=1"],
    "randread 4k QD16": ["--rw=randread", "--bs=4k", "--iodepth=16"],
    "randread 4k QD32": ["--rw=randread", "--bs=4k", "--iodepth=32"],
    "write 8k fdatasync QD1": ["--rw=randwrite", "--bs=8k", "--iodepth=1", "--fdatasync=1"],
}

def fio(target, args):
    (u0, s0), b0 = daemon_cpu(), busy_cpu()
    out = subprocess.run(["fio", "--name=floor", f"--filename={target}", "--direct=1", "--ioengine=libaio",
                          f"--runtime={dur}", "--time_based", "--ramp_time=2", "--norandommap", "--randrepeat=0",
                          "--lat_percentiles=1", "--output-format=json"] + args,
                         check=True, capture_output=True, text=True).stdout
    (u1, s1), b1 = daemon_cpu(), busy_cpu()
    j = json.loads(out)["jobs"][0]
    d = j["write"] if "randwrite" in args[0] else j["read"]
    # total_ios counts the ramp too, as the CPU deltas do.
    n = d["total_ios"] or 1
    per = lambda x: x / n * 1e6
    return d["iops"], d["lat_ns"]["percentile"]["50.000000"] / 1e3, per(u1 - u0 + s1 - s0), per(u1 - u0), per(b1 - b0)

res = {(k, w): [] for k in jobs for w in ("plain", "model")}
for _ in range(rounds):
    for k, args in jobs.items():
        for w, t in (("plain", plain), ("model", dev)):
            res[(k, w)].append(fio(t, args))

med = statistics.median
print(f"emu floor, {datetime.date.today()}, {rounds} alternating rounds of {dur} s, medians (fio libaio, direct)")
print(f"{'workload':<24}{'plain p50 µs':>13}{'model p50 µs':>13}{'added µs':>10}{'plain IOPS':>12}{'model IOPS':>12}{'ratio':>7}{'daemon CPU µs/IO':>18}")
for k in jobs:
    p, m = res[(k, "plain")], res[(k, "model")]
    pp, mp = med([x[1] for x in p]), med([x[1] for x in m])
    pi, mi = med([x[0] for x in p]), med([x[0] for x in m])
    cpu = med([x[2] for x in m])
    print(f"{k:<24}{pp:>13.1f}{mp:>13.1f}{mp - pp:>10.1f}{pi:>12.0f}{mi:>12.0f}{mi / pi:>7.2f}{cpu:>18.1f}")
print("goals: added p50 < 30 µs at QD1; QD16 IOPS ratio >= 0.7")
# Where the CPU goes: the machine's busy CPU per I/O on each path, and the
# daemon's own user-space share of it. What the daemon can remove is at most
# its user time (its system time is the kernel's FUSE work done in its
# threads: fetching requests, copying replies, completing the loop's
# requests); "bound" is the IOPS ratio the model path would reach if that
# user time were zero and the machine stayed as busy as the plain loop's.
print(f"{'workload':<24}{'plain CPU µs/IO':>16}{'model CPU µs/IO':>16}{'daemon user µs/IO':>19}{'bound':>7}")
for k in jobs:
    p, m = res[(k, "plain")], res[(k, "model")]
    pb, mb, du = med([x[4] for x in p]), med([x[4] for x in m]), med([x[3] for x in m])
    print(f"{k:<24}{pb:>16.1f}{mb:>16.1f}{du:>19.2f}{pb / max(mb - du, 1e-9):>7.2f}")
PY
