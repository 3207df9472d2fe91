-- Orders from the datagen connector: ids 1..20, a random amount and a
-- product, an event time computed from the id, and a watermark 4 s behind.
-- Run: go run ./cmd/clink sql -f examples/sql/datagen_print.sql
SET 'execution.checkpointing.interval' = '1s';

CREATE TABLE orders (
  order_id BIGINT,
  amount   INT,
  product  STRING,
  ts AS TO_TIMESTAMP_LTZ(order_id * 1000, 3),
  WATERMARK FOR ts AS ts - INTERVAL '4' SECOND
) WITH (
  'connector' = 'datagen',
  'number-of-rows' = '20',
  'rows-per-second' = '100',
  'fields.order_id.kind' = 'sequence',
  'fields.order_id.start' = '1',
  'fields.order_id.end' = '20',
  'fields.amount.min' = '1',
  'fields.amount.max' = '100',
  'fields.product.length' = '1'
);

CREATE TABLE big_orders (
  order_id BIGINT,
  amount   INT,
  product  STRING,
  ts       TIMESTAMP_LTZ(3)
) WITH ('connector' = 'print', 'print-identifier' = 'big');

CREATE TABLE product_totals (
  product STRING,
  orders  BIGINT,
  total   INT
) WITH ('connector' = 'print', 'print-identifier' = 'totals');

CREATE VIEW priced AS
SELECT order_id, amount, UPPER(product) AS product, ts FROM orders;

EXPLAIN CHANGELOG_MODE
INSERT INTO product_totals
SELECT product, COUNT(*), SUM(amount) FROM priced GROUP BY product HAVING SUM(amount) > 50;

EXECUTE STATEMENT SET BEGIN
INSERT INTO big_orders SELECT * FROM priced WHERE amount >= 50;
INSERT INTO product_totals
SELECT product, COUNT(*), SUM(amount) FROM priced GROUP BY product HAVING SUM(amount) > 50;
END;
