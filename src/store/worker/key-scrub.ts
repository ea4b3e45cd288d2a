// No tracegate key is stored in a trace or leaves in an exported span, whatever the account's PII setting:
// a read key, an export or the dashboard could otherwise recover a proxy key from a prompt or an answer
// that holds one as written, with JSON escapes, or split between the deltas of a stream.
import { maskText, type Mask } from './pii-at-rest.js'

/**
 * A key (auth/keys.ts: `tgk_` and 43 url-safe characters), or what is left of one where a capture limit
 * cut it: 16 characters and more. The characters are ASCII and never JSON escapes, so the replacement
 * keeps JSON and server-sent events valid.
 */
const KEY_SHAPED = /tgk_[A-Za-z0-9_-]{16,}/g

export const KEY_PLACEHOLDER = '[TRACEGATE_KEY]'

const MARK = Buffer.from('tgk_')
/** `\u00` then 2 to 7: the only JSON escapes that can write a key's characters (all ASCII from `-` to `z`). */
const ESCAPE = Buffer.from('\\u00')
/**
 * Where a stream value can start with the rest of a key split before its `_`: a fragment holding that
 * `_` either holds `tgk_` or opens with `_`, `k_` or `gk_`, right after the quote of its JSON string.
 */
const SPLIT_STARTS = ['"_', '"k_', '"gk_'].map((s) => Buffer.from(s))

const NONE: readonly Mask[] = Object.freeze([])

/** The keys in one decoded value or one stream's assembled text. */
function findKeys (text: string): readonly Mask[] {
  if (!text.includes('tgk_')) return NONE
  const out: Mask[] = []
  for (const m of text.matchAll(KEY_SHAPED)) out.push({ start: m.index, end: m.index + m[0].length, kind: 'tracegate_key', placeholder: KEY_PLACEHOLDER })
  return out
}

function escapesKeyCharacter (bytes: Buffer): boolean {
  for (let at = bytes.indexOf(ESCAPE); at !== -1; at = bytes.indexOf(ESCAPE, at + 4)) {
    const c = bytes[at + 4]
    if (c !== undefined && c >= 0x32 && c <= 0x37) return true
  }
  return false
}

/**
 * Whether a key could be there only once the JSON is decoded: written with escapes, or (in a stream) in
 * a value that the next events continue. Byte searches only, so a text without either costs no decode.
 */
function needsDecoding (bytes: Buffer, streaming: boolean): boolean {
  if (escapesKeyCharacter(bytes)) return true
  if (!streaming) return false
  if (bytes.indexOf(MARK) !== -1) return true
  for (const s of SPLIT_STARTS) if (bytes.indexOf(s) !== -1) return true
  return false
}

/**
 * The text with every key-shaped run replaced, in the JSON's decoded string values (a stream's values at
 * one path read as the text they assemble, as PII masking reads them) and then anywhere in the raw text
 * (an object key, a text that is not JSON). JSON stays valid; the same bytes (no copy) when it holds no key.
 * The text is valid UTF-8 (rows.ts stores it so; a span's text is read with replacement characters).
 */
export function withoutTracegateKeys (text: Uint8Array, streaming: boolean): Uint8Array {
  const bytes = Buffer.from(text.buffer, text.byteOffset, text.byteLength)
  if (needsDecoding(bytes, streaming)) {
    const before = bytes.toString('utf8')
    const after = maskText(before, streaming, {}, findKeys).replace(KEY_SHAPED, KEY_PLACEHOLDER)
    return after === before ? text : Buffer.from(after, 'utf8')
  }
  if (bytes.indexOf(MARK) === -1) return text
  // latin1 maps each byte to one character and back, so every other byte is kept as it was.
  const before = bytes.toString('latin1')
  const after = before.replace(KEY_SHAPED, KEY_PLACEHOLDER)
  return after === before ? text : Buffer.from(after, 'latin1')
}
