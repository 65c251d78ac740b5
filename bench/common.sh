# Shared by the bench scripts (sourced): build storbench, a scratch results
# store, the PostgreSQL URL's parts, the benchmark database, and a median.
here=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p storbench --manifest-path "$here/Cargo.toml"
sb="$here/target/release/storbench"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export STORBENCH_RESULTS="$work/results.db"

# pg_parts URL: sets dbname, user, host, port from postgres://user@host:port/db
pg_parts() {
  local u=$1 hp
  dbname=${u##*/}; hp=${u#postgres://}; hp=${hp%%/*}
  user=${hp%%@*}; hp=${hp#*@}; host=${hp%%:*}; port=${hp##*:}
}

# ensure_db: creates $dbname on the server if it is missing.
ensure_db() {
  psql -qAt -h "$host" -p "$port" -U "$user" -d postgres -c "SELECT 1 FROM pg_database WHERE datname='$dbname'" | grep -q 1 \
    || psql -q -h "$host" -p "$port" -U "$user" -d postgres -c "CREATE DATABASE $dbname"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
