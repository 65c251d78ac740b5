#!/usr/bin/env bash
# The counted goals of issue 23 (binary share, functions over 120 lines
# outside tests, import circles inside crates): see bench/house-counts.py.
#
#   bench/house-counts.sh            # prints the counts
#   bench/house-counts.sh --check    # and exits 1 when a goal is missed
#   bench/house-counts.sh --edges    # and each circle's edges first
set -euo pipefail
exec python3 "$(dirname "$0")/house-counts.py" "$@"
