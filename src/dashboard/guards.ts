// The checks in front of the UI API: the session cookie, the request's origin and the CSRF token, the
// caller's roles (a signed-in user still enabled in its account; an admin for what changes the account),
// who the client is (for the sign-in limiter) and whether it came over TLS (for the cookie's Secure flag).
import { TracegateError } from '../errors.js'
import type { StoreClient } from '../store/client.js'
import type { AccountRow, UserRow } from '../domain/accounts.js'
import type { Req } from './http.js'
import { COOKIE_NAME, cookieValue, type Session, type Sessions } from './session.js'

export interface GuardOptions {
  /** Behind a reverse proxy: believe its PROXY protocol header and x-forwarded-for/-host/-proto. Off by default. */
  readonly trustProxy: boolean
}

/** A request's caller on the UI API: a user of the session's account, still there and enabled, and that account. */
export interface Caller {
  readonly session: Session
  readonly accountId: string
  readonly user: UserRow
  readonly account: AccountRow
  /** An admin changes the account's limits, detection policy and PII at rest; a member reads them. */
  readonly admin: boolean
}

export class Guards {
  readonly sessions: Sessions
  readonly #store: StoreClient
  readonly #trustProxy: boolean

  constructor (sessions: Sessions, store: StoreClient, options: GuardOptions) {
    this.sessions = sessions
    this.#store = store
    this.#trustProxy = options.trustProxy
  }

  /** The signed-in session, or 401 unauthenticated. */
  session (req: Req): Session {
    const s = this.sessions.verify(cookieValue(req.headers.get('cookie'), COOKIE_NAME))
    if (s === null) throw new TracegateError('unauthenticated')
    return s
  }

  /**
   * An Origin header, when present, must be this dashboard's own (scheme aside: a TLS-terminating proxy
   * may sit in front), and a browser that says the request is cross-site is refused.
   */
  origin (req: Req): void {
    if (req.headers.get('sec-fetch-site') === 'cross-site') throw new TracegateError('csrf_failed')
    const origin = req.headers.get('origin')
    if (origin === undefined) return
    let host: string
    try {
      const url = new URL(origin)
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('scheme')
      host = url.host
    } catch {
      throw new TracegateError('csrf_failed')
    }
    const own = (this.#trustProxy ? req.headers.get('x-forwarded-host') : undefined) ?? req.headers.get('host')
    if (own === undefined || own.toLowerCase() !== host.toLowerCase()) throw new TracegateError('csrf_failed')
  }

  /** A state change: a session, this origin, and the session's CSRF token in x-csrf-token. */
  change (req: Req): Session {
    const s = this.session(req)
    this.origin(req)
    if (!this.sessions.checkCsrf(s, req.headers.get('x-csrf-token'))) throw new TracegateError('csrf_failed')
    return s
  }

  /**
   * The caller, for a read (`change` false) or a state change (session, origin and CSRF token first). A
   * session outlives neither its user nor the user's being disabled: either is 401 unauthenticated.
   */
  async caller (req: Req, change: boolean): Promise<Caller> {
    return this.callerOf(change ? this.change(req) : this.session(req))
  }

  /** The caller behind a verified session (sign-in's new one included). */
  async callerOf (session: Session): Promise<Caller> {
    const [user, account] = await Promise.all([
      this.#store.call('getUser', { accountId: session.accountId, id: session.userId }),
      this.#store.call('getAccount', { id: session.accountId }),
    ])
    if (user === null || user.disabled || account === null) throw new TracegateError('unauthenticated')
    return { session, accountId: session.accountId, user, account, admin: user.role === 'admin' }
  }

  /** A state change only an admin of the account may make (`what` completes "Only an admin of the account may …"); 403 not_allowed otherwise. */
  async admin (req: Req, what: string): Promise<Caller> {
    const c = await this.caller(req, true)
    if (!c.admin) throw new TracegateError('not_allowed', { message: `Only an admin of the account may ${what}.` })
    return c
  }

  /**
   * Who the client is. The socket's peer unless a proxy is trusted: then the client its PROXY protocol
   * header named, else the address it appended to x-forwarded-for (earlier entries are the client's own
   * claims). The PROXY header comes first because a proxy that sends it may pass HTTP through untouched
   * (a TCP load balancer): x-forwarded-for is then the client's own. Untrusted, neither header counts.
   */
  clientAddress (req: Req): string {
    if (!this.#trustProxy) return req.peer
    if (req.proxiedPeer !== '') return req.proxiedPeer
    const hops = (req.headers.get('x-forwarded-for') ?? '').split(',').map((h) => h.trim()).filter((h) => h !== '')
    return hops[hops.length - 1] ?? req.peer
  }

  secure (req: Req): boolean {
    return this.#trustProxy && req.headers.get('x-forwarded-proto') === 'https'
  }
}
