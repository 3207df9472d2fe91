-- Window aggregation with Flink's window table-valued functions: bids at
-- one per second of event time (ids 1..60), counted and summed per
-- auction in 10-second tumbling windows and in 20-second windows sliding
-- every 10 s. Each window prints once (+I) when the watermark passes its
-- end; the end of the bounded input fires the last ones.
-- Run: go run ./cmd/clink sql -f examples/sql/window_tvf.sql
SET 'execution.checkpointing.interval' = '1s';

CREATE TABLE bid (
  id      BIGINT,
  price   INT,
  auction AS id % 3,
  ts AS CAST(TO_TIMESTAMP_LTZ(id * 1000, 3) AS TIMESTAMP(3)),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (
  'connector' = 'datagen',
  'rows-per-second' = '100',
  'fields.id.kind' = 'sequence',
  'fields.id.start' = '1',
  'fields.id.end' = '60',
  'fields.price.min' = '1',
  'fields.price.max' = '100'
);

CREATE TABLE per_auction (
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  auction      BIGINT,
  bids         BIGINT,
  total        INT
) WITH ('connector' = 'print', 'print-identifier' = 'tumble');

CREATE TABLE hot (
  window_end TIMESTAMP(3),
  bids       BIGINT,
  top        INT
) WITH ('connector' = 'print', 'print-identifier' = 'hop');

EXPLAIN
INSERT INTO per_auction
SELECT window_start, window_end, auction, COUNT(*), SUM(price)
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, auction;

EXECUTE STATEMENT SET BEGIN
INSERT INTO per_auction
SELECT window_start, window_end, auction, COUNT(*), SUM(price)
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, auction;
INSERT INTO hot
SELECT window_end, COUNT(*), MAX(price)
FROM TABLE(HOP(DATA => TABLE bid, TIMECOL => DESCRIPTOR(ts), SLIDE => INTERVAL '10' SECOND, SIZE => INTERVAL '20' SECOND))
GROUP BY window_start, window_end;
END;
