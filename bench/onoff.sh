# Shared by the on/off cost scripts (sourced): runs the caller's `tps on`
# and `tps off` (each prints one run's TPS) alternately for $1 rounds, the
# order swapped every round so a drift favours neither; prints each round,
# the median TPS of each mode and the median of the per-round on/off ratios
# with the cost it means. Uses $work (a scratch directory). Sourced after
# setting $here (the repository); SB=path/to/storbench takes that binary
# instead of building the release one.
if [ -z "${SB:-}" ]; then
  cargo build --release -q -p storbench --manifest-path "$here/Cargo.toml"
  SB="${CARGO_TARGET_DIR:-$here/target}/release/storbench"
fi
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
alternate() {
  local rounds=$1 r order m t_on t_off ratio
  printf "%5s %10s %10s %8s\n" round on off on/off
  : > "$work/on"; : > "$work/off"; : > "$work/ratio"
  for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 1 ]; then order="on off"; else order="off on"; fi
    for m in $order; do eval "t_$m=$(tps "$m")"; done
    echo "$t_on" >> "$work/on"; echo "$t_off" >> "$work/off"
    ratio=$(awk -v a="$t_on" -v b="$t_off" 'BEGIN { printf "%.4f", a / b }')
    echo "$ratio" >> "$work/ratio"
    printf "%5s %10.1f %10.1f %8s\n" "$r" "$t_on" "$t_off" "$ratio"
  done
  ratio=$(median < "$work/ratio")
  printf "median %10.1f %10.1f %8s  (cost %.2f %%)\n" "$(median < "$work/on")" "$(median < "$work/off")" "$ratio" \
    "$(awk -v r="$ratio" 'BEGIN { print (1 - r) * 100 }')"
}
