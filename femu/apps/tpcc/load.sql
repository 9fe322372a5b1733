-- Loads the TPC-C-like database with :warehouses warehouses at the specification's
-- cardinalities (TPC-C 4.3.3.1): 100,000 items; per warehouse 100,000 stock rows and 10
-- districts; per district 3,000 customers (one history row each) and 3,000 orders of 5-15
-- lines, the last 900 of them undelivered (new_order). Run with
--   psql -v warehouses=N -f load.sql
\set ON_ERROR_STOP on
INSERT INTO item
SELECT i, 1 + floor(random() * 10000)::int, tpcc_text(14, 24), 1 + floor(random() * 9900) / 100.0,
       CASE WHEN random() < 0.1 THEN 'ORIGINAL' || tpcc_text(18, 42) ELSE tpcc_text(26, 50) END
FROM generate_series(1, 100000) AS i;

INSERT INTO warehouse
SELECT w, tpcc_text(6, 10), tpcc_text(10, 20), tpcc_text(10, 20), tpcc_text(10, 20), 'CA',
       '123411111', floor(random() * 2001) / 10000.0, 300000
FROM generate_series(1, :warehouses) AS w;

INSERT INTO district
SELECT w, d, tpcc_text(6, 10), tpcc_text(10, 20), tpcc_text(10, 20), tpcc_text(10, 20), 'CA',
       '123411111', floor(random() * 2001) / 10000.0, 30000, 3001
FROM generate_series(1, :warehouses) AS w, generate_series(1, 10) AS d;

INSERT INTO stock
SELECT w, i, 10 + floor(random() * 91)::int,
       tpcc_text(24, 24), tpcc_text(24, 24), tpcc_text(24, 24), tpcc_text(24, 24), tpcc_text(24, 24),
       tpcc_text(24, 24), tpcc_text(24, 24), tpcc_text(24, 24), tpcc_text(24, 24), tpcc_text(24, 24),
       0, 0, 0,
       CASE WHEN random() < 0.1 THEN 'ORIGINAL' || tpcc_text(18, 42) ELSE tpcc_text(26, 50) END
FROM generate_series(1, :warehouses) AS w, generate_series(1, 100000) AS i;

-- Customers 1..1000 take the last names 0..999 in order, the rest a non-uniform one.
INSERT INTO customer
SELECT w, d, c, tpcc_text(8, 16), 'OE',
       tpcc_last_name(CASE WHEN c <= 1000 THEN c - 1 ELSE tpcc_nurand(255, 0, 999, 157) END),
       tpcc_text(10, 20), tpcc_text(10, 20), tpcc_text(10, 20), 'CA', '123411111', '0123456789012345',
       now(), CASE WHEN random() < 0.1 THEN 'BC' ELSE 'GC' END, 50000, floor(random() * 5001) / 10000.0,
       -10, 10, 1, 0, tpcc_text(300, 500)
FROM generate_series(1, :warehouses) AS w, generate_series(1, 10) AS d, generate_series(1, 3000) AS c;

INSERT INTO history
SELECT c, d, w, d, w, now(), 10, tpcc_text(12, 24)
FROM generate_series(1, :warehouses) AS w, generate_series(1, 10) AS d, generate_series(1, 3000) AS c;

-- Orders of each district go to its customers in a random permutation.
INSERT INTO orders
SELECT w, d, o, c, now(), CASE WHEN o < 2101 THEN 1 + floor(random() * 10)::int END,
       5 + floor(random() * 11)::int, 1
FROM generate_series(1, :warehouses) AS w, generate_series(1, 10) AS d,
     LATERAL (SELECT row_number() OVER (ORDER BY random())::int AS o, c
              FROM generate_series(1, 3000) AS c WHERE w > 0 AND d > 0) AS perm;

INSERT INTO new_order
SELECT o_w_id, o_d_id, o_id FROM orders WHERE o_id >= 2101;

INSERT INTO order_line
SELECT o_w_id, o_d_id, o_id, n, 1 + floor(random() * 100000)::int, o_w_id,
       CASE WHEN o_id < 2101 THEN o_entry_d END, 5,
       CASE WHEN o_id < 2101 THEN 0 ELSE floor(random() * 999999 + 1) / 100.0 END, tpcc_text(24, 24)
FROM orders, generate_series(1, 15) AS n
WHERE n <= o_ol_cnt;

VACUUM ANALYZE;
