-- Nexmark q10, log to file system: every bid written to files, with its day
-- and minute as columns.
--
-- The DDL differs from Flink's: clink's filesystem sink has no partitioned
-- tables yet (PARTITIONED BY (dt, hm) and the partition-commit and rolling
-- options), so the day and minute are plain columns of csv files under
-- ${OUTPUT_DIR}/q10, committed exactly once at each checkpoint.
CREATE TABLE nexmark_q10 (
  auction  BIGINT,
  bidder  BIGINT,
  price  BIGINT,
  `dateTime`  TIMESTAMP(3),
  extra  VARCHAR,
  dt STRING,
  hm STRING
) WITH (
  'connector' = 'filesystem',
  'path' = '${OUTPUT_DIR}/q10',
  'format' = 'csv'
);

INSERT INTO nexmark_q10
SELECT auction, bidder, price, `dateTime`, extra, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd'), DATE_FORMAT(`dateTime`, 'HH:mm')
FROM bid;
