-- What the caller said about a call (x-tracegate-user, -session, -tags, -metadata), so queries can filter
-- on it: `WHERE user = 'u-42'`, `WHERE session = '…'`, `WHERE has(tags, 'eval')`, `WHERE metadata['team'] = 'x'`.
-- Rows stored before this read as '' / [] / {}. The usage rollup is untouched: its view names its columns.
ALTER TABLE traces ADD COLUMN IF NOT EXISTS user String DEFAULT '' AFTER endpoint;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS session String DEFAULT '' AFTER user;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS tags Array(String) DEFAULT [] AFTER session;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS metadata Map(String, String) DEFAULT map() AFTER tags;
-- The table is ordered by account and time: a user's or a session's calls, or a tag, are found by skipping
-- the granules whose bloom filter rules them out (parts written before this are read in full, and hold none).
ALTER TABLE traces ADD INDEX IF NOT EXISTS user_idx user TYPE bloom_filter GRANULARITY 4;
ALTER TABLE traces ADD INDEX IF NOT EXISTS session_idx session TYPE bloom_filter GRANULARITY 4;
ALTER TABLE traces ADD INDEX IF NOT EXISTS tags_idx tags TYPE bloom_filter GRANULARITY 4;
