-- Per-account threshold for data spans (issue 22): the score at which text the model is handed to read
-- (tool and function results, documents, search results, files, pasted text) counts as injection. NULL:
-- the account's threshold, so accounts stored before this judge data as they judged everything else.
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS detection_data_threshold Nullable(Float64) AFTER detection_threshold;
