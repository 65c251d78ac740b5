#!/usr/bin/env python3
# Every validate output in $OUT (bench/emu-lead-ab.sh): per cell the
# emulated mean latency against the model's own prediction in disk.toml,
# and the median |error| per run (all cells, and those inside the envelope).
import glob, os, statistics as st, tomllib
out = os.environ.get("OUT", "/tmp/ab")
model = tomllib.load(open(f"{out}/disk.toml", "rb"))
pred = {c["cell"]: c["predicted_mean_us"] for c in model["cells"]}
files = sorted(glob.glob(f"{out}/val-*.txt"), key=lambda f: f[-8:])
tags = [os.path.basename(f)[4:-4] for f in files]
rows = {}
for f, tag in zip(files, tags):
    for line in open(f):
        parts = [x.strip(" │\n") for x in line.strip().split("┆")]
        if len(parts) > 5 and parts[0].strip("│ ") in pred:
            rows.setdefault(parts[0].strip("│ "), {})[tag] = (float(parts[5]), parts[-1])
print("%-28s %7s " % ("cell", "model") + " ".join("%16s" % t for t in tags))
errs = {}
for cell, by in rows.items():
    line = "%-28s %7.1f " % (cell, pred[cell])
    for t in tags:
        if t in by:
            emu, env = by[t]
            e = (emu / pred[cell] - 1) * 100
            errs.setdefault(t, []).append((abs(e), env))
            line += "%7.0f %+6.1f%% %s" % (emu, e, env[:1])
    print(line)
for t in tags:
    v = errs.get(t, [])
    inside = [a for a, env in v if env.startswith("in")]
    print(f"{t}: median |emulated/model - 1| all {st.median([a for a, _ in v]):.1f} %, inside {st.median(inside) if inside else 0:.1f} %")
