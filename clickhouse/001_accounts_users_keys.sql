-- Accounts, users and service keys. These tables are small and change rarely; each change inserts a new
-- version of the row (ReplacingMergeTree by updated_at) and reads use FINAL, so a revoke is one insert.
CREATE TABLE IF NOT EXISTS accounts
(
    id UUID,
    name String,
    plan LowCardinality(String),
    server_side_keys Bool DEFAULT false,
    created_at DateTime64(3, 'UTC'),
    updated_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY id;

CREATE TABLE IF NOT EXISTS users
(
    account_id UUID,
    id UUID,
    email String,
    password_hash String,
    role LowCardinality(String) DEFAULT 'admin',
    created_at DateTime64(3, 'UTC'),
    updated_at DateTime64(3, 'UTC'),
    disabled_at Nullable(DateTime64(3, 'UTC'))
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (account_id, id);

CREATE TABLE IF NOT EXISTS api_keys
(
    account_id UUID,
    id UUID,
    key_hash FixedString(64),
    prefix String,
    name String,
    scope LowCardinality(String),
    created_at DateTime64(3, 'UTC'),
    expires_at Nullable(DateTime64(3, 'UTC')),
    revoked_at Nullable(DateTime64(3, 'UTC')),
    updated_at DateTime64(3, 'UTC'),
    INDEX key_hash_idx key_hash TYPE bloom_filter GRANULARITY 1
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (account_id, id);
