-- Per-key and per-account limits (issue 14): requests and tokens per minute, spend per UTC day and month,
-- the models a key may call, and a key's largest request body. NULL (and [] for the models) is no limit,
-- so rows stored before this read as unlimited. A change is a new version of the row, as a revoke is.
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS limit_rpm Nullable(UInt32) AFTER revoked_at;
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS limit_tpm Nullable(UInt64) AFTER limit_rpm;
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS budget_day_usd Nullable(Float64) AFTER limit_tpm;
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS budget_month_usd Nullable(Float64) AFTER budget_day_usd;
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS allowed_models Array(String) DEFAULT [] AFTER budget_month_usd;
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS max_body_bytes Nullable(UInt64) AFTER allowed_models;
-- An account's limits bind all its keys together; a body size is a key's alone.
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS limit_rpm Nullable(UInt32) AFTER server_side_keys;
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS limit_tpm Nullable(UInt64) AFTER limit_rpm;
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS budget_day_usd Nullable(Float64) AFTER limit_tpm;
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS budget_month_usd Nullable(Float64) AFTER budget_day_usd;
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS allowed_models Array(String) DEFAULT [] AFTER budget_month_usd;
