#!/usr/bin/env bash
# The emulator's timed-reply lateness (issue 25): raw media with the constant
# model at each read time given (µs), each made afresh (its floor probe run),
# QD1 random reads (4 KiB, or the size given third): storbench io (io_uring) 3 s, then 1,300 O_DIRECT
# preads; prints p50 beyond the model's time, the medium's floor figures and
# the daemon's CPU during the io_uring run (all its threads' time on CPU, as
# a share of one CPU: the timer's spin shows here).
#   SB=target/release/storbench flock -x /tmp/storbench-measure.lock bench/emu-timed-sweep.sh "0 30 60 100 200 400" [qd] [bs]
set -euo pipefail
SB=${SB:?}; times=${1:-"0 30 60 100 200 400"}; qd=${2:-1}; bs=${3:-4k}
work=$(mktemp -d); export STORBENCH_STATE="$work/state" STORBENCH_RESULTS="$work/r.db"
trap '"$SB" -q media destroy --all >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
for t in $times; do
  "$SB" -q media destroy --all >/dev/null 2>&1 || true
  "$SB" -q media create sw --size 256M --fs none --model constant --set read=${t}us >/dev/null
  read -r dev fl pid < <("$SB" --json media list | python3 -c 'import json,sys; m=json.load(sys.stdin)[0]; f=m["daemon"]["floor"]; print(m["device"], "%.1f/%.1f/%.1f/%.1f/%.1f"%(f["qd1_p50_us"],f.get("qd1_p50_64k_us",0),f["timed_extra_us"],f.get("timed_lead_us",0),f.get("timed_lead_far_us",0)), m["daemon"]["pid"])')
  cpu_ns() { cat /proc/"$pid"/task/*/schedstat | awk '{s += $1} END {print s}'; }
  c0=$(cpu_ns); w0=$(date +%s%N)
  out=$("$SB" --json -q io "$dev" --bs $bs --rw randread --qd $qd --duration 3s --rampup 1s 2>/dev/null)
  c1=$(cpu_ns); w1=$(date +%s%N)
  export DCPU=$(awk -v a="$c0" -v b="$c1" -v s="$w0" -v e="$w1" 'BEGIN { printf "%.0f", (b - a) / (e - s) * 100 }')
  DEV=$dev T=$t FL=$fl OUT="$out" QD=$qd BS=$bs python3 - <<'PY'
import json,os,time,mmap,random
out=os.environ["OUT"]; t=float(os.environ["T"])
rec=next(json.JSONDecoder().raw_decode(out[out.index("{"):]) for _ in [0])[0]
m=rec["steps"][0]["metrics"]; g=lambda k: m.get(k,{}).get("value",float("nan"))
s=""
if os.environ["QD"]=="1":
  bs=int(os.environ["BS"].rstrip("k"))*1024
  fd=os.open(os.environ["DEV"],os.O_RDONLY|os.O_DIRECT); buf=mmap.mmap(-1,bs); n=(256<<20)//bs; lat=[]
  for i in range(1500):
    o=random.randrange(n)*bs; a=time.perf_counter_ns(); os.preadv(fd,[buf],o); b=time.perf_counter_ns()
    if i>=200: lat.append((b-a)/1e3)
  lat.sort(); s=f" pread p50 {lat[len(lat)//2]:.1f} (+{lat[len(lat)//2]-t:.1f})"
print(f"model {t:5.0f} us bs {os.environ['BS']} floor(4k/64k/timed/lead/far) {os.environ['FL']}: io_uring mean {g('io.lat.mean'):.1f} p50 {g('io.lat.p50'):.1f} (+{g('io.lat.p50')-t:.1f}) p99 {g('io.lat.p99'):.1f} iops {g('io.iops'):.0f} daemon cpu {os.environ['DCPU']} %{s}")
PY
done
