// Dashboard sessions: a cookie carrying {session id, user, account, expiry}, signed with HMAC-SHA256 by a
// secret kept in the data directory (made on first start, mode 600), so sessions survive a restart. A
// sign-out records the session id until its expiry (in memory and in a small file beside the secret),
// so a signed-out cookie is refused even after a restart. The CSRF token is an HMAC of the session id:
// nothing to store, and it dies with the session. A password reset (`tracegate user reset-password`)
// records the user and the time in a second file: that user's sessions issued until then are refused.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { appendFileSync, chmodSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadResets, recordPasswordReset } from '../password-resets.js'

export const COOKIE_NAME = 'tg_session'
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000

export interface Session {
  readonly sid: string
  readonly userId: string
  readonly accountId: string
  /** Epoch ms. */
  readonly expiresAt: number
}

function loadSecret (file: string): Buffer {
  try {
    writeFileSync(file, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
  }
  // An operator's copy may have been made with looser permissions.
  if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600)
  const hex = readFileSync(file, 'utf8').trim()
  if (!/^[0-9a-f]{64,}$/.test(hex)) throw new Error(`${file} is not a dashboard secret (64+ hex digits); delete it to make a new one`)
  return Buffer.from(hex, 'hex')
}

function equal (a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/** The value of one cookie in a Cookie header, or null. */
export function cookieValue (header: string | undefined, name: string): string | null {
  if (header === undefined) return null
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return null
}

export class Sessions {
  readonly #secret: Buffer
  readonly #signoutFile: string
  readonly #dataDir: string
  /** Signed-out session ids and their expiry. */
  readonly #signedOut = new Map<string, number>()
  /** Users whose password was reset, and when: their sessions issued until then are refused. */
  readonly #resets: Map<string, number>

  constructor (dataDir: string) {
    this.#secret = loadSecret(join(dataDir, 'dashboard-secret'))
    this.#signoutFile = join(dataDir, 'dashboard-signouts')
    this.#dataDir = dataDir
    const now = Date.now()
    this.#resets = loadResets(dataDir, now, SESSION_TTL_MS)
    let text = ''
    try { text = readFileSync(this.#signoutFile, 'utf8') } catch { /* none yet */ }
    for (const line of text.split('\n')) {
      const [sid, exp] = line.split(' ')
      if (sid !== undefined && sid !== '' && Number(exp) > now) this.#signedOut.set(sid, Number(exp))
    }
    // Rewritten without the expired ones, so the file stays as small as the live sessions.
    writeFileSync(this.#signoutFile, [...this.#signedOut].map(([s, e]) => `${s} ${e}\n`).join(''), { mode: 0o600 })
  }

  #sign (payload: string): string {
    return createHmac('sha256', this.#secret).update(payload).digest('base64url')
  }

  /** A new session and the cookie value that carries it. */
  issue (userId: string, accountId: string, now = Date.now()): { session: Session; value: string } {
    const session: Session = { sid: randomBytes(18).toString('base64url'), userId, accountId, expiresAt: now + SESSION_TTL_MS }
    const payload = Buffer.from(JSON.stringify({ s: session.sid, u: session.userId, a: session.accountId, e: session.expiresAt })).toString('base64url')
    return { session, value: `${payload}.${this.#sign(payload)}` }
  }

  /** The session a cookie value carries, or null when it is forged, expired or signed out. */
  verify (value: string | null, now = Date.now()): Session | null {
    if (value === null) return null
    const dot = value.indexOf('.')
    if (dot <= 0) return null
    const payload = value.slice(0, dot)
    if (!equal(value.slice(dot + 1), this.#sign(payload))) return null
    let p: { s?: unknown; u?: unknown; a?: unknown; e?: unknown }
    try {
      p = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as typeof p
    } catch {
      return null
    }
    if (typeof p.s !== 'string' || typeof p.u !== 'string' || typeof p.a !== 'string' || typeof p.e !== 'number') return null
    if (p.e <= now || this.#signedOut.has(p.s)) return null
    // Issued (expiry minus the lifetime) no later than the user's last password reset.
    const reset = this.#resets.get(p.u)
    if (reset !== undefined && p.e - SESSION_TTL_MS <= reset) return null
    return { sid: p.s, userId: p.u, accountId: p.a, expiresAt: p.e }
  }

  csrfToken (s: Session): string {
    return this.#sign(`csrf:${s.sid}`)
  }

  checkCsrf (s: Session, token: string | undefined): boolean {
    return token !== undefined && equal(token, this.csrfToken(s))
  }

  signOut (s: Session, now = Date.now()): void {
    for (const [sid, exp] of this.#signedOut) if (exp <= now) this.#signedOut.delete(sid)
    this.#signedOut.set(s.sid, s.expiresAt)
    appendFileSync(this.#signoutFile, `${s.sid} ${s.expiresAt}\n`, { mode: 0o600 })
  }

  /** Ends every session of the user issued until now (a password reset), here and after a restart. */
  endUser (userId: string, now = Date.now()): void {
    this.#resets.set(userId, now)
    recordPasswordReset(this.#dataDir, userId, now)
  }

  static setCookie (value: string, secure: boolean): string {
    return `${COOKIE_NAME}=${value}; Path=/; Max-Age=${SESSION_TTL_MS / 1000}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`
  }

  static clearCookie (secure: boolean): string {
    return `${COOKIE_NAME}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`
  }
}
