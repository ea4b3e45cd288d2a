// The checks in front of the UI API: the session cookie, the request's origin and the CSRF token, and
// who the client is (for the sign-in limiter) and whether it came over TLS (for the cookie's Secure flag).
import { TracegateError } from '../errors.js'
import type { Req } from './http.js'
import { COOKIE_NAME, cookieValue, type Session, type Sessions } from './session.js'

export interface GuardOptions {
  /** Behind a reverse proxy: believe its PROXY protocol header and x-forwarded-for/-host/-proto. Off by default. */
  readonly trustProxy: boolean
}

export class Guards {
  readonly sessions: Sessions
  readonly #trustProxy: boolean

  constructor (sessions: Sessions, options: GuardOptions) {
    this.sessions = sessions
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
