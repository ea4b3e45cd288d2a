-- Per-account detection policy (issue 16): what a verdict does ('block', 'monitor', 'off'), the score at
-- which it blocks (NULL: the detector's own threshold), and the phrases that never count as injection for
-- the account. The defaults are today's behaviour, so accounts stored before this read as 'block' with the
-- detector's threshold and no phrases. A change is a new version of the row, as a limit change is.
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS detection_policy LowCardinality(String) DEFAULT 'block' AFTER allowed_models;
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS detection_threshold Nullable(Float64) AFTER detection_policy;
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS detection_allow Array(String) DEFAULT [] AFTER detection_threshold;
