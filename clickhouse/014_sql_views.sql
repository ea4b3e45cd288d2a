-- The SQL port's tables: views in the `account` database that show only the rows of the account named by
-- the query's log_comment setting, which the SQL port alone sets (a caller can change no setting there).
-- Without it, or with anything but a UUID, they show the rows of the nil account: none. A view lists its
-- columns when made: a later migration that adds a column to traces or usage_minute recreates the view.
CREATE DATABASE IF NOT EXISTS account;

CREATE VIEW IF NOT EXISTS account.traces AS
SELECT
    account_id, time, trace_id, key_id, provider, model, endpoint, user, session, tags, metadata, streaming,
    confidential, status, outcome, error_code, error_cause, prompt, prompt_truncated, response, response_truncated, request_bytes, response_bytes,
    input_tokens, output_tokens, cached_input_tokens, token_source, latency_ms, ttfb_ms, ttft_ms, provider_ms,
    overhead_ms, cost_usd, cost_status, detection, issues
FROM traces
WHERE account_id = toUUIDOrZero(getSetting('log_comment'));

CREATE VIEW IF NOT EXISTS account.usage AS
SELECT
    account_id, minute, key_id, provider, model, requests, blocked, errors, input_tokens, output_tokens,
    cached_input_tokens, cost_usd, unpriced_calls
FROM usage_minute
WHERE account_id = toUUIDOrZero(getSetting('log_comment'));
