#!/usr/bin/env bash
# Miss-ratio curves at scale: a synthetic 10-million-request Zipf(0.8) trace
# over 1 M lines of 64 KiB (written by the hidden `storbench cache gen`), then,
# alternately for --rounds rounds: the exact LRU curve (Fenwick stack
# distance) and the SHARDS curve at 1 % sampling. Prints the median wall time
# of each against the issue's goals (exact < 10 s, SHARDS < 2 s), the mean
# absolute error of SHARDS against exact over 64 sizes, and the simulation
# throughput of each policy (accesses per second per thread, the simulation
# alone, from the JSON's sim_accesses_per_s) beside libCacheSim's tens of
# millions per second per core.
#
#   flock /tmp/storbench-measure.lock bench/mrc.sh [--requests 10000000] [--lines 1000000] [--rounds 3]
set -euo pipefail
requests=10000000; lines=1000000; rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) requests=$2; shift 2;; --lines) lines=$2; shift 2;; --rounds) rounds=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p storbench --manifest-path "$here/Cargo.toml"
sb="${CARGO_TARGET_DIR:-$here/target}/release/storbench"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
trace="$work/zipf.sbtrace"
"$sb" cache gen "$trace" --requests "$requests" --lines "$lines" --zipf 0.8 --line 64k
sizes=1m..256g   # 19 doublings; the JSON's lru_fine has 8 points per doubling

secs() { local t0 t1; t0=$(date +%s.%N); "$@" >"$out"; t1=$(date +%s.%N); awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f\n", b - a}'; }
for i in $(seq "$rounds"); do
  out="$work/exact.json"; secs "$sb" --quiet --json cache mrc "$trace" --sizes "$sizes" >>"$work/exact.t"
  out="$work/shards.json"; secs "$sb" --quiet --json cache mrc "$trace" --sizes "$sizes" --sample 0.01 >>"$work/shards.t"
done
# The paper's MAE: 100 sizes evenly spaced (linear) up to the footprint.
fp=$(python3 -c "import json; r=json.load(open('$work/exact.json')); print(r['footprint_lines']*r['line'])")
lin=$(python3 -c "print(','.join(str(($fp*i//100)//65536*65536) for i in range(1,101)))")
out="$work/exact-lin.json"; "$sb" --quiet --json cache mrc "$trace" --sizes "$lin" >"$out"
out="$work/shards-lin.json"; "$sb" --quiet --json cache mrc "$trace" --sizes "$lin" --sample 0.01 >"$out"
out="$work/sim.json"
"$sb" --quiet --json cache mrc "$trace" --sizes 1g,4g,16g --policy lru,clock,arc,2q,s3fifo,sieve >"$out"
out="$work/simshards.json"
"$sb" --quiet --json cache mrc "$trace" --sizes 1g,4g,16g --policy lru,clock,arc,2q,s3fifo,sieve --sample 0.01 >"$out"

WORK="$work" python3 - <<'PY'
import json, os, statistics
w = os.environ["WORK"]
t = lambda f: [float(x) for x in open(f"{w}/{f}")]
ex, sh = t("exact.t"), t("shards.t")
e, s = json.load(open(f"{w}/exact.json")), json.load(open(f"{w}/shards.json"))
# Up to the footprint: beyond it both curves sit at the cold-miss ratio and
# would only dilute the error.
fp = e["footprint_lines"] * e["line"]
pairs = [(a[1], b[1]) for a, b in zip(e["lru_fine"], s["lru_fine"]) if a[0] <= fp]
mae = statistics.mean(abs(a - b) for a, b in pairs)
worst = max(abs(a - b) for a, b in pairs)
print(f"trace: {e['accesses']} accesses, footprint {e['footprint_lines']} lines (SHARDS estimate {s['footprint_lines']})")
print(f"exact LRU curve:   median {statistics.median(ex):.2f} s over {len(ex)} runs {ex}  (goal < 10 s)")
print(f"SHARDS 1 % curve:  median {statistics.median(sh):.2f} s over {len(sh)} runs {sh}  (goal < 2 s)")
print(f"SHARDS vs exact MAE, 8 log-spaced sizes per doubling up to the footprint ({len(pairs)}): {mae:.4f} (worst {worst:.4f})")
el, sl = json.load(open(f"{w}/exact-lin.json")), json.load(open(f"{w}/shards-lin.json"))
d = [abs(a - b) for a, b in zip(el["curves"][0]["miss_ratio"], sl["curves"][0]["miss_ratio"])]
print(f"SHARDS vs exact MAE, {len(d)} evenly spaced sizes up to the footprint (FAST'15's measure): {statistics.mean(d):.4f} (worst {max(d):.4f})  (goal < 0.01)")
for name in ("sim.json", "simshards.json"):
    r = json.load(open(f"{w}/{name}"))
    print(f"policy simulation, {r['method']} ({r['sampled_accesses']} accesses per size), 1g/4g/16g miss ratios:")
    for c in r["curves"]:
        rate = c["sim_accesses_per_s"]
        rate = f"{rate / 1e6:6.1f} M accesses/s/thread" if rate else "   (stack distance)      "
        print(f"  {c['policy']:7s} {rate}  " + " ".join(f"{m:.4f}" for m in c["miss_ratio"]))
PY
