// Helpers for the dashboard, read API and browser tests: a tracegate with the dashboard on port 0 (and,
// when asked, its first-start admin), accounts with a signed-in user, a client that keeps the session
// cookie and CSRF token like a browser would, and calls through the proxy.
import { Agent, request, WebSocket } from 'undici'
import type { FirstStart, ServeOptions } from '../../src/tracegate.js'
import { startServer, type TestServer } from './server.js'
import { send } from './http.js'
import { bodyFor, type Provider, ROUTES } from './bodies.js'
import { until } from './wait.js'

/** A time as the APIs and the CLI's --json answer it: ISO 8601 in UTC, with its zone. */
export const ISO_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/

interface Tap {
  teardown (fn: () => unknown): void
}

export interface Answer {
  readonly status: number
  readonly headers: Record<string, string | string[] | undefined>
  readonly text: string
  readonly json: any
}

export interface CallOptions {
  readonly body?: unknown
  readonly headers?: Record<string, string>
  /** Send the Origin of the dashboard (default true) or this one. */
  readonly origin?: boolean | string
  /** Send the session's CSRF token (default true). */
  readonly csrf?: boolean
  readonly cookie?: boolean
}

export class UiClient {
  readonly base: string
  readonly #dispatcher: Agent
  cookie: string | null = null
  csrf: string | null = null

  constructor (base: string, dispatcher: Agent) {
    this.base = base
    this.#dispatcher = dispatcher
  }

  async call (method: 'GET' | 'POST', path: string, o: CallOptions = {}): Promise<Answer> {
    const headers: Record<string, string> = { ...o.headers }
    if (o.origin !== false) headers.origin = typeof o.origin === 'string' ? o.origin : this.base
    if (o.cookie !== false && this.cookie !== null) headers.cookie = this.cookie
    if (o.csrf !== false && this.csrf !== null) headers['x-csrf-token'] = this.csrf
    let body: string | undefined
    if (o.body !== undefined) {
      body = typeof o.body === 'string' ? o.body : JSON.stringify(o.body)
      headers['content-type'] ??= 'application/json'
    }
    const r = await request(this.base + path, { method, headers, body, dispatcher: this.#dispatcher })
    const text = await r.body.text()
    let json: any = null
    try { json = JSON.parse(text) } catch { /* not JSON */ }
    return { status: r.statusCode, headers: r.headers, text, json }
  }

  get (path: string, o: CallOptions = {}): Promise<Answer> {
    return this.call('GET', path, o)
  }

  post (path: string, body: unknown = {}, o: CallOptions = {}): Promise<Answer> {
    return this.call('POST', path, { ...o, body })
  }

  /** Signs in and keeps the cookie and token; returns the answer. */
  async signIn (email: string, password: string, o: CallOptions = {}): Promise<Answer> {
    const r = await this.post('/api/ui/signin', { email, password }, o)
    const setCookie = r.headers['set-cookie']
    const first = Array.isArray(setCookie) ? setCookie[0] : setCookie
    if (r.status === 200 && first !== undefined) {
      this.cookie = first.split(';')[0]!
      this.csrf = r.json.csrf
    }
    return r
  }

  /** Opens the live socket with this client's cookie; resolves once open, or rejects when refused. */
  live (origin: string = this.base, csrf: string | null = this.csrf): Promise<LiveSocket> {
    const url = this.base.replace(/^http/, 'ws') + '/api/ui/live' + (csrf === null ? '' : `?csrf=${encodeURIComponent(csrf)}`)
    const headers: Record<string, string> = { origin }
    if (this.cookie !== null) headers.cookie = this.cookie
    const ws = new WebSocket(url, { headers } as any)
    return new Promise((resolve, reject) => {
      const messages: any[] = []
      ws.addEventListener('message', (e) => { messages.push(JSON.parse(String(e.data))) })
      ws.addEventListener('open', () => { resolve(new LiveSocket(ws, messages)) })
      ws.addEventListener('error', () => { reject(new Error('live socket refused')) })
    })
  }
}

export class LiveSocket {
  readonly ws: WebSocket
  readonly messages: any[]
  closed = false

  constructor (ws: WebSocket, messages: any[]) {
    this.ws = ws
    this.messages = messages
    ws.addEventListener('close', () => { this.closed = true })
  }

  /** Every trace id received so far. */
  traceIds (): string[] {
    return this.messages.flatMap((m) => m.type === 'traces' ? m.traces.map((t: any) => t.trace_id) : [])
  }

  waitFor (traceId: string, ms = 5_000): Promise<any> {
    return until(() => {
      for (const m of this.messages) {
        const t = m.type === 'traces' ? m.traces.find((x: any) => x.trace_id === traceId) : undefined
        if (t !== undefined) return t
      }
      return undefined
    }, { ms, everyMs: 20, what: `live trace ${traceId}` })
  }

  close (): void {
    this.ws.close()
  }
}

export interface Tenant {
  readonly accountId: string
  readonly email: string
  readonly password: string
  /** A proxy key of this account. */
  readonly proxyKey: string
  readonly proxyKeyId: string
}

export interface DashboardServer extends TestServer {
  readonly dashboard: string
  readonly dispatcher: Agent
  readonly client: () => UiClient
  readonly tenant: (name: string) => Promise<Tenant>
}

/** A client of `s` signed in as `who` (a tenant or any user); throws when the sign-in is refused. */
export async function signedIn (s: DashboardServer, who: { readonly email: string; readonly password: string }): Promise<UiClient> {
  const c = s.client()
  const r = await c.signIn(who.email, who.password)
  if (r.status !== 200) throw new Error(`sign-in ${who.email}: ${r.status} ${r.text}`)
  return c
}

/**
 * A tracegate with its dashboard; `{ bootstrap: true }` makes the first start on the empty data directory
 * create the admin (see firstStart).
 */
export async function startDashboard (t: Tap, env: Record<string, string> = {}, options: ServeOptions = {}): Promise<DashboardServer> {
  const dispatcher = new Agent({ keepAliveTimeout: 1_000 })
  const s = await startServer(t, env, options)
  // Registered after the server's, so it runs first: no kept-alive socket holds the dashboard open.
  t.teardown(() => dispatcher.close())
  const dashboard = `http://127.0.0.1:${s.tg.dashboardPort}`
  let n = 0
  const tenant = async (name: string): Promise<Tenant> => {
    const account = await s.tg.admin.createAccount({ name, plan: 'pro' })
    const email = `${name}-${++n}@example.com`
    const password = `pw-${name}-correct-horse`
    await s.tg.admin.createUser({ account: account.id, email, password })
    const key = await s.tg.admin.createKey({ account: account.id, scope: 'proxy', name: `${name} proxy` })
    return { accountId: account.id, email, password, proxyKey: key.key, proxyKeyId: key.id }
  }
  return { ...s, dashboard, dispatcher, client: () => new UiClient(dashboard, dispatcher), tenant }
}

/** The admin the first start created (startDashboard with bootstrap). */
export function firstStart (s: DashboardServer): FirstStart {
  if (s.tg.firstStart === null) throw new Error('the first start on an empty data directory made no admin')
  return s.tg.firstStart
}

/** One call through the proxy; returns its status and trace id. */
export async function proxyCall (s: TestServer, key: string, provider: Provider = 'alpha', fields: Record<string, unknown> = {}): Promise<{ status: number; traceId: string; text: string }> {
  const r = await send(s.url + ROUTES[provider], { body: JSON.stringify(bodyFor(provider, { api_key: key, ...fields })) })
  return { status: r.status, traceId: String(r.headers['x-request-id']), text: r.text }
}

/** Reads a whole paginated list, following next_cursor. */
export async function allPages (get: (cursor: string | null) => Promise<Answer>): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = []
  let cursor: string | null = null
  let pages = 0
  do {
    const r = await get(cursor)
    if (r.status !== 200) throw new Error(`page ${pages}: ${r.status} ${r.text}`)
    ids.push(...r.json.traces.map((x: any) => x.trace_id))
    cursor = r.json.next_cursor
    pages++
  } while (cursor !== null && pages < 1000)
  return { ids, pages }
}
