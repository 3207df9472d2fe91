-- Orders joined with their customers, the top two orders of each city by
-- amount (an updating Top-N), and sessions of each customer's orders.
-- Run: go run ./cmd/clink sql -f examples/sql/join_topn.sql
SET 'execution.checkpointing.interval' = '1s';

CREATE TABLE customers (
  id   BIGINT,
  city STRING
) WITH (
  'connector' = 'datagen', 'number-of-rows' = '5', 'rows-per-second' = '0',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '5',
  'fields.city.length' = '1'
);

CREATE TABLE orders (
  order_id BIGINT,
  customer BIGINT,
  amount   INT,
  ts AS TO_TIMESTAMP_LTZ(order_id * 700, 3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (
  'connector' = 'datagen', 'number-of-rows' = '30', 'rows-per-second' = '100',
  'fields.order_id.kind' = 'sequence', 'fields.order_id.start' = '1', 'fields.order_id.end' = '30',
  'fields.customer.min' = '1', 'fields.customer.max' = '5',
  'fields.amount.min' = '1', 'fields.amount.max' = '100'
);

CREATE TABLE top_orders (city STRING, rn BIGINT, order_id BIGINT, amount INT)
  WITH ('connector' = 'print', 'print-identifier' = 'top');
CREATE TABLE sessions (customer BIGINT, orders BIGINT, total INT, s TIMESTAMP_LTZ(3), e TIMESTAMP_LTZ(3))
  WITH ('connector' = 'print', 'print-identifier' = 'session');

CREATE VIEW enriched AS
SELECT o.order_id, o.amount, c.city
FROM orders AS o JOIN customers AS c ON o.customer = c.id;

EXECUTE STATEMENT SET BEGIN
INSERT INTO top_orders
SELECT city, rn, order_id, amount FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY city ORDER BY amount DESC) AS rn FROM enriched
) WHERE rn <= 2;
INSERT INTO sessions
SELECT customer, COUNT(*), SUM(amount), window_start, window_end
FROM TABLE(SESSION(TABLE orders PARTITION BY customer, DESCRIPTOR(ts), INTERVAL '2' SECOND))
GROUP BY customer, window_start, window_end;
END;
