# Shared by the emulator's bench scripts (sourced after `set -euo pipefail`).
#   measure_locked "$@"   re-runs the script under the exclusive measurement
#                         lock (/tmp/storbench-measure.lock): measurements
#                         never overlap
#   emu_setup             builds storbench (or takes $SB) and makes a scratch
#                         $work with its own state directory and results store
here=$(cd "$(dirname "$0")/.." && pwd)

measure_locked() {
  if [ -z "${SB_MEASURE_LOCKED:-}" ]; then
    exec env SB_MEASURE_LOCKED=1 flock /tmp/storbench-measure.lock "$0" "$@"
  fi
}

emu_setup() {
  if [ -z "${SB:-}" ]; then
    cargo build --release -q -p storbench --manifest-path "$here/Cargo.toml"
    SB="$here/target/release/storbench"
  fi
  work=$(mktemp -d)
  export STORBENCH_STATE="$work/state" STORBENCH_RESULTS="$work/results.db"
}
