-- How many calls of each rollup row had no price (their trace's cost_usd is NULL, cost_status
-- 'unknown_model'), so the usage page can tell "$0.00" from "not priced": cost_usd sums the priced calls
-- alone. Rows summed before this migration read 0, as "all priced", which is what they showed until now.
-- The view is made again to carry the column: a batch inserted by an older tracegate (without the column)
-- still counts, as all priced.
ALTER TABLE usage_minute ADD COLUMN IF NOT EXISTS unpriced_calls SimpleAggregateFunction(sum, UInt64) DEFAULT 0 AFTER cost_usd;
ALTER TABLE usage_batches ADD COLUMN IF NOT EXISTS unpriced_calls UInt64 DEFAULT 0 AFTER cost_usd;

DROP VIEW IF EXISTS usage_batches_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_batches_mv TO usage_minute AS
SELECT
    account_id, minute, key_id, provider, model, requests, blocked, errors,
    input_tokens, output_tokens, cached_input_tokens, cost_usd, unpriced_calls,
    arrayReduce('quantilesTDigestState(0.5, 0.95, 0.99)', latencies) AS latency
FROM usage_batches;
