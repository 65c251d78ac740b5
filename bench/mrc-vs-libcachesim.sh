#!/usr/bin/env bash
# Policy simulation against libCacheSim (its Python package, `pip install libcachesim`,
# which runs libCacheSim's C core): the same synthetic trace as bench/mrc.sh
# (10 M requests, Zipf(0.8) over 1 M lines of 64 KiB), converted to libCacheSim's
# oracleGeneral format with every object of size 1, so a cache of N lines is a cache
# of N objects in both. For each policy and round, alternately (who goes first swaps
# every round): storbench `cache mrc --policy P --sizes 1g,4g,16g` on one core
# (taskset, so it simulates on one thread) and libCacheSim's process_trace at the
# same three sizes. Prints per policy the medians of accesses per second per thread
# and the median ratio storbench/libCacheSim, and both miss ratios (they must agree).
#
# The timings differ in one way: storbench times the simulation alone (the trace is
# in memory, its sim_accesses_per_s); libCacheSim's process_trace reads each request
# from the trace file (its reader is part of its loop). libCacheSim's reader alone is
# timed too (a FIFO of size 1 over the trace) and shown, so the simulation's share
# can be judged.
#
#   flock /tmp/storbench-measure.lock bench/mrc-vs-libcachesim.sh [--rounds 3] [--policies "clock arc 2q s3fifo sieve"] [--python PY]
set -euo pipefail
rounds=3; policies="clock arc 2q s3fifo sieve"; py=${PYTHON:-python3}
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2;; --policies) policies=$2; shift 2;; --python) py=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
"$py" -c "import libcachesim" 2>/dev/null || {
  echo "libcachesim is not importable by $py: python3 -m venv /tmp/lcs && /tmp/lcs/bin/pip install libcachesim, then --python /tmp/lcs/bin/python" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p storbench --manifest-path "$here/Cargo.toml"
export SB="${SB:-${CARGO_TARGET_DIR:-$here/target}/release/storbench}" ROUNDS="$rounds" POLICIES="$policies"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export WORK="$work"
"$SB" cache gen "$work/zipf.sbtrace" --requests 10000000 --lines 1000000 --zipf 0.8 --line 64k
"$py" - <<'PY'
import json, os, statistics, struct, subprocess, time, datetime
import libcachesim as lcs

w, sb, rounds = os.environ["WORK"], os.environ["SB"], int(os.environ["ROUNDS"])
policies = os.environ["POLICIES"].split()
LINE = 65536
sizes = [1 << 30, 4 << 30, 16 << 30]
# sbtrace: 16-byte header, 32-byte records (t_ns u64, offset u64, len u32, lat u32, op u8, pad).
# oracleGeneral: u32 time, u64 id, u32 size, i64 next access (unused by these policies).
with open(f"{w}/zipf.sbtrace", "rb") as f, open(f"{w}/zipf.oracleGeneral", "wb") as o:
    f.read(16)
    n = 0
    while chunk := f.read(32 << 16):
        out = bytearray()
        for t, off, _l, _lat, _op in struct.iter_unpack("<QQIIB7x", chunk):
            out += struct.pack("<IQIq", n // 1000 + 1, off // LINE, 1, -1)
            n += 1
        o.write(out)
N = n
reader = lcs.TraceReader(f"{w}/zipf.oracleGeneral", lcs.TraceType.ORACLE_GENERAL_TRACE)
LCS = {"clock": lcs.Clock, "arc": lcs.ARC, "2q": lcs.TwoQ, "s3fifo": lcs.S3FIFO, "sieve": lcs.Sieve}

def run_lcs(p):
    secs, miss = 0.0, []
    for s in sizes:
        c = LCS[p](cache_size=s // LINE)
        t0 = time.perf_counter()
        m, _ = c.process_trace(reader)
        secs += time.perf_counter() - t0
        miss.append(m)
    return N * len(sizes) / secs, miss

def run_sb(p):
    out = subprocess.run(["taskset", "-c", "0", sb, "--quiet", "--json", "cache", "mrc", f"{w}/zipf.sbtrace",
                          "--sizes", "1g,4g,16g", "--policy", p], check=True, capture_output=True, text=True).stdout
    c = json.loads(out)["curves"][0]
    return c["sim_accesses_per_s"], c["miss_ratio"]

def reader_alone():
    c = lcs.FIFO(cache_size=1)
    t0 = time.perf_counter()
    c.process_trace(reader)
    return N / (time.perf_counter() - t0)

med = statistics.median
print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, load "
      f"{os.getloadavg()[0]:.1f}, {N} requests, {rounds} rounds, libcachesim {getattr(lcs, '__version__', '?')}")
print(f"libCacheSim reader + FIFO(1) alone: {med([reader_alone() for _ in range(rounds)]) / 1e6:.1f} M requests/s")
print(f"{'policy':<8} {'storbench':>10} {'libCacheSim':>12} {'ratio':>6} {'min-max':>11}   miss 1g/4g/16g storbench | libCacheSim")
for p in policies:
    xs = []
    for n in range(rounds):
        if n % 2 == 0:
            a = run_sb(p); b = run_lcs(p)
        else:
            b = run_lcs(p); a = run_sb(p)
        xs.append((a, b))
    ratios = [a[0] / b[0] for a, b in xs]
    ms, ml = xs[-1][0][1], xs[-1][1][1]
    print(f"{p:<8} {med([a[0] for a, _ in xs]) / 1e6:>8.1f} M {med([b[0] for _, b in xs]) / 1e6:>10.1f} M "
          f"{med(ratios):>6.2f} {min(ratios):>5.2f}-{max(ratios):<5.2f}   "
          + " ".join(f"{m:.4f}" for m in ms) + " | " + " ".join(f"{m:.4f}" for m in ml))
PY
