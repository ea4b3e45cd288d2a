-- One row per call that got past authentication. Ordered by account first (every query filters on it),
-- partitioned by month. Retried batches carry an insert_deduplication_token; the deduplication window
-- makes a replayed batch a no-op on this non-replicated table. Body and row TTLs are applied at start
-- from the configuration (store/retention.ts).
CREATE TABLE IF NOT EXISTS traces
(
    account_id UUID,
    time DateTime64(3, 'UTC'),
    trace_id UUID,
    key_id UUID,
    provider LowCardinality(String),
    model LowCardinality(String),
    endpoint LowCardinality(String),
    streaming Bool,
    confidential Bool,
    status UInt16,
    outcome LowCardinality(String),
    error_code LowCardinality(String),
    prompt String CODEC(ZSTD(3)),
    prompt_truncated Bool,
    response String CODEC(ZSTD(3)),
    response_truncated Bool,
    request_bytes UInt32,
    response_bytes UInt64,
    input_tokens UInt32,
    output_tokens UInt32,
    cached_input_tokens UInt32,
    token_source LowCardinality(String),
    latency_ms Float32,
    ttfb_ms Nullable(Float32),
    ttft_ms Nullable(Float32),
    provider_ms Nullable(Float32),
    overhead_ms Float32,
    cost_usd Nullable(Float64),
    cost_status LowCardinality(String),
    detection String,
    issues String,
    INDEX trace_id_idx trace_id TYPE bloom_filter GRANULARITY 4
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(time)
ORDER BY (account_id, time, trace_id)
SETTINGS non_replicated_deduplication_window = 10000;

-- Usage per account, key, provider, model and minute, kept by a materialized view so the dashboard
-- never scans raw traces for a chart.
CREATE TABLE IF NOT EXISTS usage_minute
(
    account_id UUID,
    minute DateTime('UTC'),
    key_id UUID,
    provider LowCardinality(String),
    model LowCardinality(String),
    requests SimpleAggregateFunction(sum, UInt64),
    blocked SimpleAggregateFunction(sum, UInt64),
    errors SimpleAggregateFunction(sum, UInt64),
    input_tokens SimpleAggregateFunction(sum, UInt64),
    output_tokens SimpleAggregateFunction(sum, UInt64),
    cached_input_tokens SimpleAggregateFunction(sum, UInt64),
    cost_usd SimpleAggregateFunction(sum, Float64),
    latency AggregateFunction(quantilesTDigest(0.5, 0.95, 0.99), Float32)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(minute)
ORDER BY (account_id, minute, key_id, provider, model);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_minute_mv TO usage_minute AS
SELECT
    account_id,
    toStartOfMinute(time) AS minute,
    key_id,
    provider,
    model,
    count() AS requests,
    countIf(outcome = 'blocked') AS blocked,
    countIf(outcome IN ('rejected', 'provider_error', 'provider_stream_error', 'proxy_error')) AS errors,
    sum(input_tokens) AS input_tokens,
    sum(output_tokens) AS output_tokens,
    sum(cached_input_tokens) AS cached_input_tokens,
    sum(ifNull(cost_usd, 0)) AS cost_usd,
    quantilesTDigestState(0.5, 0.95, 0.99)(latency_ms) AS latency
FROM traces
GROUP BY account_id, minute, key_id, provider, model;
