#!/usr/bin/env bash
# What the quiet New-Order rollback costs the 99 % of New-Orders that commit:
# the PL/pgSQL routine runs its body in a block with an exception handler (a
# subtransaction) so the designed rollback never reaches the log. pgbench
# calls the routine as storbench builds it and the same routine without the
# handler (as it was before: raising to the client), alternately, one
# client, random districts, customers and ten random items (no rollback:
# every item exists); prints the median server-side calls per second of
# each and the ratio, and of a third, "guarded" form: the routine without
# the handler whose district update is skipped when an item is missing (no
# write before the item check, so only the rare rollback would need the
# subtransaction), to see what a routine built that way would save.
#
#   flock /tmp/storbench-measure.lock bench/tpcc-rollback-cost.sh [--duration 15] [--rounds 3]
#       [--db postgres://root@127.0.0.1:5432/storbench_nobench]
set -euo pipefail
duration=15; rounds=3; db=postgres://root@127.0.0.1:5432/storbench_nobench
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration=$2; shift 2;; --rounds) rounds=$2; shift 2;; --db) db=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
. "$(dirname "$0")/common.sh"
pg_parts "$db"
ensure_db
q() { psql -qAt -h "$host" -p "$port" -U "$user" -d "$dbname" -c "$1"; }
"$sb" -q tpcc build --db "$db" --warehouses 1 --replace >/dev/null
# The routine without its handler, under another name.
q "SELECT pg_get_functiondef('sb_neword'::regproc)" | python3 -c '
import sys
f = sys.stdin.read()
f = f.replace("sb_neword(", "sb_neword_raise(", 1)
f = f.replace("EXCEPTION WHEN SQLSTATE '"'"'SB001'"'"' THEN\n  RETURN NULL;\n", "")
assert "EXCEPTION WHEN" not in f
print(f)' > "$work/raise.sql"
psql -q -h "$host" -p "$port" -U "$user" -d "$dbname" -f "$work/raise.sql"
python3 - "$work/raise.sql" > "$work/guard.sql" <<'PY'
import sys
f = open(sys.argv[1]).read().replace("sb_neword_raise(", "sb_neword_guard(", 1)
old = "UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = p_w AND d_id = p_d"
assert old in f
f = f.replace(old, old + " AND (SELECT count(*) FROM item WHERE i_id = ANY (string_to_array(p_items, ',')::int[])) = (SELECT count(DISTINCT x) FROM unnest(string_to_array(p_items, ',')::int[]) x)")
print(f)
PY
psql -q -h "$host" -p "$port" -U "$user" -d "$dbname" -f "$work/guard.sql"
for f in sb_neword sb_neword_raise sb_neword_guard; do
  {
    echo '\set d random(1, 10)'
    echo '\set c random(1, 3000)'
    for i in $(seq 10); do echo "\\set i$i random(1, 100000)"; done
    echo "SELECT $f(1, :d, :c, 10, 1, :i1 || ',' || :i2 || ',' || :i3 || ',' || :i4 || ',' || :i5 || ',' || :i6 || ',' || :i7 || ',' || :i8 || ',' || :i9 || ',' || :i10, '1,1,1,1,1,1,1,1,1,1', '5,5,5,5,5,5,5,5,5,5');"
  } > "$work/$f.sql"
done
echo "New-Order calls/s, 1 client, ${duration}s per run, $rounds rounds, $(nproc) CPUs, $(date -u +%F)"
: > "$work/quiet"; : > "$work/raise"; : > "$work/ratio"; : > "$work/guard"
for r in $(seq "$rounds"); do
  a=$(pgbench -n -M prepared -h "$host" -p "$port" -U "$user" -c 1 -T "$duration" -f "$work/sb_neword.sql" "$dbname" 2>/dev/null | awk '/^tps/ {print $3}')
  b=$(pgbench -n -M prepared -h "$host" -p "$port" -U "$user" -c 1 -T "$duration" -f "$work/sb_neword_raise.sql" "$dbname" 2>/dev/null | awk '/^tps/ {print $3}')
  g=$(pgbench -n -M prepared -h "$host" -p "$port" -U "$user" -c 1 -T "$duration" -f "$work/sb_neword_guard.sql" "$dbname" 2>/dev/null | awk '/^tps/ {print $3}')
  echo "$g" >> "$work/guard"
  echo "$a" >> "$work/quiet"; echo "$b" >> "$work/raise"; python3 -c "print($a / $b)" >> "$work/ratio"
  echo "round $r: with handler $a, without $b, guarded $g" >&2
done
printf "%14s %14s %8s %14s\n" "with handler" "without" ratio "guarded"
printf "%14.1f %14.1f %8.3f %14.1f\n" "$(median < "$work/quiet")" "$(median < "$work/raise")" "$(median < "$work/ratio")" "$(median < "$work/guard")"
