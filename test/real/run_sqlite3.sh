#!/usr/bin/env bash
# sqlite3 (the shell) under pcpmalloc vs glibc: a generated SQL workload on a database file
# (tables filled by many INSERT statements in transactions and by recursive CTEs, indexes,
# joins, GROUP BY, window functions, JSON, updates, deletes, VACUUM, integrity check), then a
# second process that reopens the file and queries it, and an in-memory database.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
real_init "$@"

ROWS=40000
[[ $REAL_SIZE == long ]] && ROWS=200000

# The SQL is generated once, on glibc, and shared by both runs.
python3 - "$ROWS" >"$REAL_INPUT/build.sql" <<'PY'
import random, sys
rows = int(sys.argv[1])
rng = random.Random(4242)
cities = ["Aachen", "Bergen", "Cork", "Dijon", "Espoo", "Faro", "Graz", "Haarlem", "Ibiza", "Jena"]
w = lambda: "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 14)))
q = lambda s: "'" + s.replace("'", "''") + "'"
print("PRAGMA journal_mode=WAL;")
print("PRAGMA cache_size=-32768;")
print("CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, since INTEGER);")
print("CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER REFERENCES customers(id),"
      " amount INTEGER, note TEXT);")
print("CREATE TABLE items(order_id INTEGER, sku TEXT, qty INTEGER, price REAL);")
ncust = rows // 8
print("BEGIN;")
for i in range(1, ncust + 1):
    print("INSERT INTO customers VALUES(%d, %s, %s, %d);"
          % (i, q(w() + " " + w()), q(rng.choice(cities)), 2000 + rng.randint(0, 24)))
print("COMMIT;")
for start in range(1, rows + 1, 5000):
    print("BEGIN;")
    for i in range(start, min(rows, start + 4999) + 1):
        note = " ".join(w() for _ in range(rng.randint(0, 12)))
        print("INSERT INTO orders(id, customer, amount, note) VALUES(%d, %d, %d, %s);"
              % (i, rng.randint(1, ncust), rng.randint(1, 100000), q(note)))
    print("COMMIT;")
print("""
INSERT INTO items
  WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < %d)
  SELECT x %% %d + 1, 'sku-' || (x * 7919 %% 1000), x %% 13 + 1, (x %% 997) / 4.0 FROM n;
CREATE INDEX orders_customer ON orders(customer);
CREATE INDEX items_order ON items(order_id, sku);
CREATE INDEX customers_city ON customers(city, since);
ANALYZE;
SELECT 'counts', (SELECT count(*) FROM customers), (SELECT count(*) FROM orders), (SELECT count(*) FROM items);
SELECT 'by city', c.city, count(DISTINCT c.id), count(o.id), sum(o.amount)
  FROM customers c LEFT JOIN orders o ON o.customer = c.id GROUP BY c.city ORDER BY c.city;
SELECT 'top', o.id, c.name, o.amount, sum(i.qty * i.price)
  FROM orders o JOIN customers c ON c.id = o.customer JOIN items i ON i.order_id = o.id
  GROUP BY o.id ORDER BY sum(i.qty * i.price) DESC, o.id LIMIT 10;
SELECT 'rank', customer, amount, rnk FROM (
  SELECT customer, amount, rank() OVER (PARTITION BY customer ORDER BY amount DESC, id) AS rnk
  FROM orders) WHERE rnk <= 2 AND customer %% 500 = 1 ORDER BY customer, rnk;
SELECT 'running', id, sum(amount) OVER (ORDER BY id ROWS BETWEEN 100 PRECEDING AND CURRENT ROW)
  FROM orders WHERE id %% 2500 = 0 ORDER BY id;
SELECT 'notes', length(group_concat(note, '|')), count(*) FROM (SELECT note FROM orders ORDER BY id)
  WHERE note LIKE '%%ab%%';
SELECT 'json', length(json_group_array(json_object('id', id, 'note', note))) FROM orders;
SELECT 'words', substr(note, 1, instr(note || ' ', ' ') - 1) AS w, count(*) FROM orders
  WHERE note <> '' GROUP BY w ORDER BY count(*) DESC, w LIMIT 5;
WITH RECURSIVE s(i, t) AS (SELECT 1, 'x' UNION ALL SELECT i + 1, t || printf('%%05d', i) FROM s WHERE i < 3000)
  SELECT 'strings', max(length(t)), sum(length(t)) FROM s;
BEGIN;
UPDATE orders SET amount = amount * 2, note = upper(note) WHERE id %% 3 = 0;
DELETE FROM items WHERE qty %% 7 = 0;
DELETE FROM orders WHERE amount < 500;
INSERT INTO orders(customer, amount, note) SELECT customer, amount + 1, 'copy ' || note FROM orders WHERE id %% 10 = 0;
COMMIT;
SELECT 'after', count(*), sum(amount), sum(length(note)) FROM orders;
SELECT 'orphans', count(*) FROM items WHERE order_id NOT IN (SELECT id FROM orders);
VACUUM;
PRAGMA integrity_check;
""" % (rows * 8, rows))
PY

cat >"$REAL_INPUT/query.sql" <<'SQL'
SELECT 'reopened', count(*), sum(amount) FROM orders;
SELECT 'median', amount FROM orders ORDER BY amount LIMIT 1 OFFSET (SELECT count(*) / 2 FROM orders);
SELECT 'sorted notes', length(group_concat(note, ',')) FROM (SELECT note FROM orders ORDER BY note DESC, id);
SELECT 'sku', sku, count(*), sum(qty), printf('%.2f', sum(qty * price)) FROM items
  GROUP BY sku ORDER BY sum(qty * price) DESC, sku LIMIT 5;
PRAGMA integrity_check;
SQL

cat >"$REAL_INPUT/memory.sql" <<'SQL'
CREATE TABLE t(k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 100000)
  INSERT INTO t SELECT hex(x * 2654435761 % 4294967296), zeroblob(x % 3000) FROM n;
DELETE FROM t WHERE length(v) % 5 = 0;
UPDATE t SET v = zeroblob(length(v) * 2) WHERE k LIKE '1%';
SELECT 'memory', count(*), sum(length(v)), min(k), max(k) FROM t;
SQL

workload() {
	echo "== build"
	run sqlite3-build sqlite3 -batch -bail "$PWD/test.db" <"$REAL_INPUT/build.sql"
	echo "== reopen"
	run sqlite3-query sqlite3 -batch -bail "$PWD/test.db" <"$REAL_INPUT/query.sql"
	echo "== in memory"
	run sqlite3-memory sqlite3 -batch -bail :memory: <"$REAL_INPUT/memory.sql"
}
real_compare workload
