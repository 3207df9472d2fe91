-- Nexmark q6, average selling price by seller: the average of each seller's
-- last 10 winning bids (an OVER window over a Top-1 of a join). Adapted from
-- Flink's text so that it binds: the filter on rownum moved around the
-- SELECT that names it, and the ranking refers to its input's columns
-- without the A./B. of the tables inside the derived table.
CREATE TABLE nexmark_q6 (
  seller VARCHAR,
  avg_price  BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_q6
SELECT
    Q.seller,
    AVG(Q.price) OVER
        (PARTITION BY Q.seller ORDER BY Q.`dateTime` ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
FROM (
  SELECT * FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY id, seller ORDER BY price DESC) AS rownum
    FROM (SELECT A.id, A.seller, B.price, B.`dateTime`
        FROM auction AS A,
            bid AS B
        WHERE A.id = B.auction
            and B.`dateTime` between A.`dateTime` and A.expires)
  )
  WHERE rownum <= 1
) AS Q;
