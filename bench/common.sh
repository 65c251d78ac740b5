# Shared by the bench scripts (sourced): build storbench, a scratch results
# store, the PostgreSQL URL's parts, the benchmark database, and a median.
here=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p storbench --manifest-path "$here/Cargo.toml"
sb="$here/target/release/storbench"
work=$(mktemp -d)
# At exit: the scratch directory, and the benchmark database when this run
# made it (ensure_db), so a bench leaves the server as it found it.
bench_cleanup() {
  rm -rf "$work"
  if [ -n "${created_db:-}" ]; then
    PGOPTIONS="-c client_min_messages=warning" psql -q -h "$host" -p "$port" -U "$user" -d postgres \
      -c "DROP DATABASE IF EXISTS $dbname WITH (FORCE)" || true
  fi
}
trap bench_cleanup EXIT
export STORBENCH_RESULTS="$work/results.db"

# pg_parts URL: sets dbname, user, host, port from postgres://user@host:port/db
pg_parts() {
  local u=$1 hp
  dbname=${u##*/}; hp=${u#postgres://}; hp=${hp%%/*}
  user=${hp%%@*}; hp=${hp#*@}; host=${hp%%:*}; port=${hp##*:}
}

# ensure_db: creates $dbname on the server if it is missing (and drops it
# at exit); a database that was there is kept.
ensure_db() {
  if ! psql -qAt -h "$host" -p "$port" -U "$user" -d postgres -c "SELECT 1 FROM pg_database WHERE datname='$dbname'" | grep -q 1; then
    psql -q -h "$host" -p "$port" -U "$user" -d postgres -c "CREATE DATABASE $dbname"
    created_db=1
  fi
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
