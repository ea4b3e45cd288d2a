// Service key format and hashing. A key is `tgk_` + 43 url-safe characters (32 random bytes); only its
// SHA-256 is stored, and the dashboard shows the prefix.
import * as crypto from 'node:crypto'

export const KEY_PATTERN = /^tgk_[A-Za-z0-9_-]{43}$/
const PREFIX_LENGTH = 12

export function generateKey (): string {
  return 'tgk_' + crypto.randomBytes(32).toString('base64url')
}

// Every proxied call hashes its key: the one-shot crypto.hash (Node 20.12 on) builds no Hash object per
// call; older Node 20 releases use createHash. Both give the same SHA-256 hex.
const sha256Hex: (text: string) => string = typeof crypto.hash === 'function'
  ? (text) => crypto.hash('sha256', text, 'hex')
  : (text) => crypto.createHash('sha256').update(text).digest('hex')

export function hashKey (key: string): string {
  return sha256Hex(key)
}

export function keyPrefix (key: string): string {
  return key.slice(0, PREFIX_LENGTH)
}

/** `30d`, `12h`, `45m`, `90s` → milliseconds; null when the text is not a duration. */
export function parseDuration (text: string): number | null {
  const m = /^(\d{1,6})([smhdw])$/.exec(text.trim())
  if (m === null) return null
  const unit = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }[m[2] as 's' | 'm' | 'h' | 'd' | 'w']
  const ms = Number(m[1]) * unit
  return ms > 0 ? ms : null
}
