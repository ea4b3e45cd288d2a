-- A call's attempts over its provider's targets (several base URLs, a key pool, or retries): a JSON array
-- of {target, key_id, status, ms, cause}, the last one the answer's. '' for a call made directly to its
-- only target. Never a key: a pooled key is named by its id.
ALTER TABLE traces ADD COLUMN IF NOT EXISTS attempts String DEFAULT '';

-- The SQL port's view lists its columns when made: made again with the new one.
CREATE OR REPLACE VIEW account.traces AS
SELECT
    account_id, time, trace_id, key_id, provider, model, endpoint, user, session, tags, metadata, streaming,
    confidential, status, outcome, error_code, error_cause, prompt, prompt_truncated, response, response_truncated, request_bytes, response_bytes,
    input_tokens, output_tokens, cached_input_tokens, token_source, latency_ms, ttfb_ms, ttft_ms, provider_ms,
    overhead_ms, cost_usd, cost_status, detection, issues, attempts
FROM traces
WHERE account_id = toUUIDOrZero(getSetting('log_comment'));
