-- What the response cache did for a call that asked it (x-tracegate-cache-ttl): 'hit' (answered from the
-- cache, the provider not called, cost_usd 0) or 'miss'; '' when the call did not ask. cost_saved_usd: a
-- hit's cost had the provider answered it (NULL otherwise, and for a model without a price).
ALTER TABLE traces ADD COLUMN IF NOT EXISTS cache LowCardinality(String) DEFAULT '';
ALTER TABLE traces ADD COLUMN IF NOT EXISTS cost_saved_usd Nullable(Float64);

-- The SQL port's view lists its columns when made: made again with the new ones.
CREATE OR REPLACE VIEW account.traces AS
SELECT
    account_id, time, trace_id, key_id, provider, model, endpoint, user, session, tags, metadata, streaming,
    confidential, status, outcome, error_code, error_cause, prompt, prompt_truncated, response, response_truncated, request_bytes, response_bytes,
    input_tokens, output_tokens, cached_input_tokens, token_source, latency_ms, ttfb_ms, ttft_ms, provider_ms,
    overhead_ms, cost_usd, cost_status, detection, issues, attempts, cache, cost_saved_usd
FROM traces
WHERE account_id = toUUIDOrZero(getSetting('log_comment'));
