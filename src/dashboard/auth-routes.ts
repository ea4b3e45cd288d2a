// Sign-in, sign-out and the current session. A wrong email and a wrong password get the same answer
// after the same work (a scrypt check against a stand-in hash when the email is unknown), and repeated
// failures are slowed down and then refused (signin-limit.ts).
import { randomBytes } from 'node:crypto'
import { hashPassword, verifyPassword } from '../admin/ops.js'
import { TracegateError } from '../errors.js'
import type { StoreClient } from '../store/client.js'
import type { Guards } from './guards.js'
import { HttpError, type Reply, type Req } from './http.js'
import { Sessions, type Session } from './session.js'
import { SigninLimiter } from './signin-limit.js'

export interface SessionBody {
  readonly user: { id: string; email: string; role: string }
  readonly account: { id: string; name: string; plan: string; server_side_keys: boolean }
  readonly csrf: string
}

function sleep (ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

function text (body: Record<string, unknown>, name: string, max: number): string {
  const v = body[name]
  if (typeof v !== 'string' || v === '' || v.length > max) throw new TracegateError('invalid_parameter', { param: name })
  return v
}

export class AuthRoutes {
  readonly #store: StoreClient
  readonly #guards: Guards
  readonly #limiter = new SigninLimiter()
  /** Checked against when the email is unknown, so both failures cost one scrypt. */
  readonly #standIn: Promise<string>

  readonly #onSignOut: (sid: string) => void

  constructor (store: StoreClient, guards: Guards, onSignOut: (sid: string) => void) {
    this.#store = store
    this.#guards = guards
    this.#onSignOut = onSignOut
    this.#standIn = hashPassword(randomBytes(16).toString('hex'))
    this.#standIn.catch(() => {})
  }

  /** The session's user and account, or 401 when the user is gone or disabled. */
  async body (s: Session): Promise<SessionBody> {
    const { user, account } = await this.#guards.callerOf(s)
    return {
      user: { id: user.id, email: user.email, role: user.role },
      account: { id: account.id, name: account.name, plan: account.plan, server_side_keys: account.server_side_keys },
      csrf: this.#guards.sessions.csrfToken(s),
    }
  }

  signIn = async (req: Req): Promise<Reply> => {
    this.#guards.origin(req)
    const body = req.body as Record<string, unknown>
    const email = text(body, 'email', 320).trim().toLowerCase()
    const password = text(body, 'password', 1024)
    const admission = this.#limiter.begin(email, this.#guards.clientAddress(req))
    if (!admission.ok) {
      throw new HttpError('too_many_attempts', { headers: [['retry-after', String(Math.ceil(admission.retryAfterMs / 1000))]] })
    }
    const user = await this.#store.call('findUserByEmail', { email })
    const matches = await verifyPassword(password, user?.password_hash ?? await this.#standIn)
    if (user === null || !matches || user.disabled) {
      await sleep(this.#limiter.failed(admission.attempt))
      throw new TracegateError('invalid_credentials')
    }
    this.#limiter.succeeded(admission.attempt)
    const { session, value } = this.#guards.sessions.issue(user.id, user.account_id)
    return {
      status: 200,
      body: await this.body(session),
      headers: [['set-cookie', Sessions.setCookie(value, this.#guards.secure(req))]],
    }
  }

  signOut = (req: Req): Reply => {
    const s = this.#guards.change(req)
    this.#guards.sessions.signOut(s)
    this.#onSignOut(s.sid)
    return { status: 204, headers: [['set-cookie', Sessions.clearCookie(this.#guards.secure(req))]] }
  }

  current = async (req: Req): Promise<Reply> => {
    const s = this.#guards.session(req)
    return { status: 200, body: await this.body(s) }
  }
}
