// No tracegate key is stored in a trace or leaves in an exported span, whatever the account's PII setting:
// a read key, an export or the dashboard could otherwise recover a proxy key from a prompt or an answer
// that holds one as written, with JSON escapes, or split between the deltas of a stream.
import type { ProviderName } from '../../providers/index.js'
import { maskText, remapIssues, type Mask } from './pii-at-rest.js'

/**
 * A key (auth/keys.ts: `tgk_` and 43 url-safe characters), or what is left of one where a capture limit
 * cut it: 16 characters and more. The characters are ASCII and never JSON escapes, so the replacement
 * keeps JSON and server-sent events valid.
 */
const KEY_SHAPED = /tgk_[A-Za-z0-9_-]{16,}/g

export const KEY_PLACEHOLDER = '[TRACEGATE_KEY]'

/** `\u00` then 2 to 7: the only JSON escapes that can write a key's characters (all ASCII from `-` to `z`). */
const KEY_ESCAPE = /\\u00[2-7]/
/**
 * In a stream, also a value that the next events may continue into a key: a fragment holding the `_` of
 * `tgk_` either holds `tgk_` or opens with `_`, `k_` or `gk_`, right after the quote of its JSON string.
 */
const KEY_ESCAPE_OR_SPLIT = /\\u00[2-7]|tgk_|"(?:g?k)?_/

const NONE: readonly Mask[] = Object.freeze([])

/** The keys in one decoded value or one stream's assembled text. */
function findKeys (text: string): readonly Mask[] {
  if (!text.includes('tgk_')) return NONE
  const out: Mask[] = []
  for (const m of text.matchAll(KEY_SHAPED)) out.push({ start: m.index, end: m.index + m[0].length, kind: 'tracegate_key', placeholder: KEY_PLACEHOLDER })
  return out
}

/**
 * The text with every key-shaped run replaced, in the JSON's decoded string values (a stream's values at
 * one path read as the text they assemble, as PII masking reads them) and then anywhere in the raw text
 * (an object key, a text that is not JSON). JSON stays valid; the same bytes (no copy) when it holds no key.
 * The text is valid UTF-8 (rows.ts stores it so; a span's text is read with replacement characters).
 */
export function withoutTracegateKeys (text: Uint8Array, streaming: boolean): Uint8Array {
  const bytes = Buffer.from(text.buffer, text.byteOffset, text.byteLength)
  // latin1 maps each byte to one character and back, so every other byte is kept as it was; and one
  // regex over it is the cheapest gate (a text it passes is neither decoded nor copied).
  const raw = bytes.toString('latin1')
  if ((streaming ? KEY_ESCAPE_OR_SPLIT : KEY_ESCAPE).test(raw)) {
    const before = bytes.toString('utf8')
    const after = maskText(before, streaming, {}, findKeys).replace(KEY_SHAPED, KEY_PLACEHOLDER)
    return after === before ? text : Buffer.from(after, 'utf8')
  }
  if (!raw.includes('tgk_')) return text
  const after = raw.replace(KEY_SHAPED, KEY_PLACEHOLDER)
  return after === raw ? text : Buffer.from(after, 'latin1')
}

/**
 * The findings' spans moved onto the scrubbed prompt, as masking moves them: a placeholder is shorter
 * than a key, so a span after one would point past its text, and a span on a key points at its placeholder.
 */
export function issuesOnScrubbed (issues: string, provider: ProviderName, sent: Uint8Array, scrubbed: Uint8Array): string {
  if (issues === '' || scrubbed === sent) return issues
  return remapIssues(issues, provider, Buffer.from(sent.buffer, sent.byteOffset, sent.byteLength).toString('utf8'), findKeys)
}
