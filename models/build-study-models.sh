#!/usr/bin/env bash
# Rebuilds the studies' device models (models/s*.toml) from the published
# device-level figures in models/tables/ (issue 26): one
# `storbench media calibrate --from-table` per table, the family from the
# table's own "family:" header line. Nothing is measured here and no
# database result is used: each parameter's source (a table row, or what
# was assumed and why) is in the model file's [sources].
#   usage: models/build-study-models.sh [path/to/storbench]
set -euo pipefail
cd "$(dirname "$0")/.."
SB=${1:-target/debug/storbench}
for table in models/tables/*.csv; do
  name=$(basename "$table" .csv)
  family=$(grep -m1 "family:" "$table" | sed 's/.*family: *//' | cut -d' ' -f1)
  if out=$("$SB" --quiet media calibrate --from-table "$table" --family "$family" --out "models/$name.toml" 2>&1); then
    echo "$name ($family): $(grep -o 'median |error|.*' <<<"$out" || echo fitted)"
  else
    echo "$name ($family): not fitted: $(tail -1 <<<"$out")"
  fi
done
