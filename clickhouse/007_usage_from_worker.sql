-- The usage rollup is summed by the store worker (store/worker/usage-rollup.ts) and inserted beside each
-- trace batch as a handful of rows, one per account, minute, key, provider and model, with the batch's
-- latencies: grouping every trace insert in a materialized view cost ClickHouse more per insert than the
-- insert of the small batch (README, Benchmarks). usage_batches stores nothing; its view only turns the
-- latencies into the quantile state usage_minute keeps. The rollup batch carries the trace batch's
-- deduplication token, so a replayed batch is counted once (migration 003's window on usage_minute).
-- Every tracegate writing to one ClickHouse must run this version or later: an older one relies on
-- usage_minute_mv, which this drops.
CREATE TABLE IF NOT EXISTS usage_batches
(
    account_id UUID,
    minute DateTime('UTC'),
    key_id UUID,
    provider LowCardinality(String),
    model LowCardinality(String),
    requests UInt64,
    blocked UInt64,
    errors UInt64,
    input_tokens UInt64,
    output_tokens UInt64,
    cached_input_tokens UInt64,
    cost_usd Float64,
    latencies Array(Float32)
)
ENGINE = Null;

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_batches_mv TO usage_minute AS
SELECT
    account_id, minute, key_id, provider, model, requests, blocked, errors,
    input_tokens, output_tokens, cached_input_tokens, cost_usd,
    arrayReduce('quantilesTDigestState(0.5, 0.95, 0.99)', latencies) AS latency
FROM usage_batches;

DROP VIEW IF EXISTS usage_minute_mv;
