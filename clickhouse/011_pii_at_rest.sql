-- Per-account PII at rest (issue 16): 'keep' stores prompt and response as sent, 'mask' has the store
-- worker replace the e-mails, phone numbers, card numbers, IBANs, SSNs and secrets in them with placeholders
-- before the row is written. The default is today's behaviour, so accounts stored before this read as 'keep'.
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS pii_at_rest LowCardinality(String) DEFAULT 'keep' AFTER detection_allow;
