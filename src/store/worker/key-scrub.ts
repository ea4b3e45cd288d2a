// No tracegate key is stored in a trace, whatever the account's PII setting: a read key, an export or the
// dashboard could otherwise recover a proxy key from a prompt or an answer that holds one as written.
const MARK = Buffer.from('tgk_')

/**
 * A key (auth/keys.ts: `tgk_` and 43 url-safe characters), or what is left of one where a capture limit
 * cut it: 16 characters and more. The characters are ASCII and never JSON escapes, so the replacement
 * keeps JSON and server-sent events valid.
 */
const KEY_SHAPED = /tgk_[A-Za-z0-9_-]{16,}/g

export const KEY_PLACEHOLDER = '[TRACEGATE_KEY]'

/** The stored text with every key-shaped run replaced; the same bytes (no copy) when it holds none. */
export function withoutTracegateKeys (text: Uint8Array): Uint8Array {
  const bytes = Buffer.from(text.buffer, text.byteOffset, text.byteLength)
  if (bytes.indexOf(MARK) === -1) return text
  // latin1 maps each byte to one character and back, so every other byte is kept as it was.
  const before = bytes.toString('latin1')
  const after = before.replace(KEY_SHAPED, KEY_PLACEHOLDER)
  return after === before ? text : Buffer.from(after, 'latin1')
}
