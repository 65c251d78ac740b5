#!/usr/bin/env bash
# What an fsync sends to the device under a directory's filesystem (issue
# 25: the model in process must send the same): 400 fsyncs per loop,
# counted in the device's own completed requests (/sys/block/DEV/stat:
# writes, less the flushes the kernel counts among them; flushes). Loops: a
# 4 KiB overwrite and fsync back to back, with 5 ms between (a new tick of
# the coarse clock ext4 stamps mtimes with, so the inode is written), with
# an fstat between (multigrain timestamps: a fine-grained stamp), an
# fdatasync with 5 ms between, and an append.
#
#   bench/fsync-writes.sh [--dir /work]
#
# Runs under flock /tmp/storbench-measure.lock (exclusive).
set -euo pipefail
DIR=/work
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    *) echo "bench/fsync-writes.sh: unknown argument '$1' (allowed: --dir DIR)" >&2; exit 2 ;;
  esac
done
[ -d "$DIR" ] || { echo "bench/fsync-writes.sh: --dir $DIR is not a directory" >&2; exit 2; }
exec flock -x /tmp/storbench-measure.lock python3 - "$DIR" <<'PY'
import os, sys, time
d = sys.argv[1]
src = [l.split() for l in open('/proc/self/mountinfo')]
best = max((l for l in src if os.path.realpath(d).startswith(l[4])), key=lambda l: len(l[4]))
dev = os.path.basename(os.path.realpath(best[best.index('-') + 2]))
if os.path.exists(f'/sys/class/block/{dev}/partition'):
    dev = os.path.basename(os.path.dirname(os.path.realpath(f'/sys/class/block/{dev}')))
journal = open(f'/sys/fs/ext4/{os.path.basename(best[best.index("-") + 2])}/journal_task').read().strip() if best[best.index('-') + 1] == 'ext4' else '?'
print(f"{d}: {best[best.index('-') + 1]} on {dev}, journal task {journal}; coarse clock tick {time.clock_getres(5) * 1e3:.0f} ms")
def stat():
    f = open(f'/sys/block/{dev}/stat').read().split()
    return int(f[4]), int(f[15])  # writes completed, flushes completed
path = os.path.join(d, f'.fsync-writes-{os.getpid()}')
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
try:
    os.pwrite(fd, b'x' * 65536, 0); os.fsync(fd)
    n = 400
    def run(name, body):
        (w0, f0), t0 = stat(), time.time()
        for i in range(n):
            body(i)
        (w1, f1), dt = stat(), time.time() - t0
        print(f"{name:42} writes a sync {(w1 - w0 - (f1 - f0)) / n:5.2f}  flushes a sync {(f1 - f0) / n:4.2f}  {dt / n * 1e3:6.3f} ms each")
    ow = lambda i: os.pwrite(fd, b'y' * 4096, (i % 16) * 4096)
    run("overwrite + fsync, back to back", lambda i: (ow(i), os.fsync(fd)))
    run("overwrite + fsync, 5 ms between", lambda i: (ow(i), os.fsync(fd), time.sleep(0.005)))
    run("overwrite + fstat + fsync, back to back", lambda i: (ow(i), os.fstat(fd), os.fsync(fd)))
    run("overwrite + fdatasync, 5 ms between", lambda i: (ow(i), os.fdatasync(fd), time.sleep(0.005)))
    run("append + fsync", lambda i: (os.pwrite(fd, b'y' * 4096, (16 + i) * 4096), os.fsync(fd)))
finally:
    os.close(fd)
    os.unlink(path)
PY
