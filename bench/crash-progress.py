#!/usr/bin/env python3
"""A progress summary of `storbench durability --crash-points` from its
stderr (read on stdin), instead of a line per point: per cell, a line at
every tenth of its points and at least once a minute (points done, how many
lost, were inconsistent or failed, mean seconds a point, ETA), and the last one.
Every other line (the estimate, each run, the WAL extent, warnings, errors)
passes through as it comes. Prints to stdout; used by bench/crash-points.sh
and pinned by crates/storbench/tests/crash_cli.rs."""
import re
import sys
import time

# "  [honest] point 3/12 (#736 torn after flush 12): 0 lost, consistent (1.2 s: ...; ETA 11 s)";
# the summary's ETA is from the mean point so far, not the last one's.
POINT = re.compile(
    r"^\s*\[(?P<mode>[^\]]+)\] point (?P<done>\d+)/(?P<of>\d+) \(.*\): (?P<lost>\d+) lost, "
    r"(?P<what>.*) \((?P<took>[\d.]+) s: .*ETA (?P<eta>\d+) s\)$"
)
EVERY_S = 60


def duration(s):
    s = int(s)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def main():
    cell = None  # (mode, of) of the cell being counted
    st = {}
    for line in sys.stdin:
        line = line.rstrip("\n")
        m = POINT.match(line)
        if not m:
            print(line, flush=True)
            continue
        mode, done, of = m["mode"], int(m["done"]), int(m["of"])
        if cell != (mode, of) or done == 1:
            cell = (mode, of)
            st = {"losing": 0, "lost_max": 0, "incons": 0, "failed": 0, "took": 0.0, "said": time.monotonic(),
                  "step": 0}
        lost = int(m["lost"])
        st["losing"] += lost > 0
        st["lost_max"] = max(st["lost_max"], lost)
        st["incons"] += m["what"].startswith("INCONSISTENT")
        st["failed"] += m["what"].startswith("recovery FAILED")
        st["took"] += float(m["took"])
        step = done * 10 // of
        now = time.monotonic()
        if done == of or step > st["step"] or now - st["said"] >= EVERY_S:
            st["step"], st["said"] = step, now
            print(
                f"  [{mode}] {done}/{of} points: {st['losing']} losing (at most {st['lost_max']}), "
                f"{st['incons']} inconsistent, {st['failed']} failed; {st['took'] / done:.1f} s a point"
                + ("" if done == of else f", ETA {duration(st['took'] / done * (of - done))}"),
                flush=True,
            )


if __name__ == "__main__":
    main()
