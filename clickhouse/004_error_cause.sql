-- Why tracegate answered a call with its own 5xx (or cut a stream): the upstream failure (connect refused,
-- DNS, TLS, a timeout, a reset) or the fault, with undici's or the runtime's own words. Never a key.
ALTER TABLE traces ADD COLUMN IF NOT EXISTS error_cause String DEFAULT '' AFTER error_code;
