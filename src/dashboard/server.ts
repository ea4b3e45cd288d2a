// The dashboard port: the UI's pages and files, its JSON API (session cookie, CSRF), the live WebSocket,
// and the read API (Bearer read keys). A second uWS app in the same process as the proxy.
import type { Limiter } from '../limits/limiter.js'
import type { AdminOps } from '../admin/ops.js'
import type { KeyCache } from '../auth/cache.js'
import type { Logger } from '../log.js'
import { TracegateError } from '../errors.js'
import { newRequestId } from '../ids.js'
import { MALFORMED } from '../server/head.js'
import { listen, uws, type HttpRequest, type HttpResponse } from '../server/uws.js'
import type { StoreClient } from '../store/client.js'
import { AuthRoutes } from './auth-routes.js'
import { getSession, getTrace, listSessions, listTraces, traceTotals, usage } from './data-routes.js'
import { exportRoute } from './export-route.js'
import { DetectionRoutes } from './detection-routes.js'
import { Guards } from './guards.js'
import { checkHead, errorReply, route, send, type Handler, type Reply, type Req, type RouteOptions } from './http.js'
import { KeyRoutes } from './key-routes.js'
import { LiveFeed } from './live.js'
import { ReadApi } from './read-api.js'
import { Sessions } from './session.js'
import { StoreLag } from './store-lag.js'
import { Assets } from './static.js'

export interface DashboardDeps {
  readonly store: StoreClient
  readonly keys: KeyCache
  readonly admin: AdminOps
  readonly dataDir: string
  readonly trustProxy: boolean
  readonly log: Logger | null
  readonly isClosing: () => boolean
  /** The limits' current counts, shown beside each key's and the account's limits. */
  readonly limiter: Limiter
  /**
   * Where clients send calls, for the first call the empty trace list shows: the proxy's bound port, and
   * the providers the server holds a key for (whether a call may leave its own out; never the key).
   */
  readonly proxy: { readonly port: number; readonly serverKeys: readonly string[] }
}

export const PAGES: readonly string[] = ['/', '/signin', '/traces', '/traces/:id', '/usage', '/sessions', '/sessions/:id', '/settings/keys', '/settings/account']

function answer (code: 'not_found' | 'method_not_allowed', allow?: string) {
  return (res: HttpResponse, req: HttpRequest): void => {
    if (checkHead(res, req) === MALFORMED) return
    const id = newRequestId()
    send(res, id, errorReply(new TracegateError(code), id, allow === undefined ? [] : [['allow', allow]]))
  }
}

/**
 * A page address the app does not have gets its own HTML page when a browser asks for one (Accept names
 * text/html); the API and asset paths, other methods and other clients (scripts, `tracegate doctor`'s
 * probe) keep the JSON 404.
 */
function notFound (assets: Assets) {
  const json = answer('not_found')
  const page = route((): Promise<Reply> => assets.notFoundPage())
  return (res: HttpResponse, req: HttpRequest): void => {
    const path = req.getUrl()
    const html = req.getMethod().toUpperCase() === 'GET' && !path.startsWith('/api/') && !path.startsWith('/assets/') &&
      /\btext\/html\b/i.test(req.getHeader('accept'))
    if (html) page(res, req)
    else json(res, req)
  }
}

export class DashboardServer {
  readonly port: number
  readonly #socket: unknown
  readonly #live: LiveFeed
  readonly #sessions: Sessions

  private constructor (socket: unknown, port: number, live: LiveFeed, sessions: Sessions) {
    this.#socket = socket
    this.port = port
    this.#live = live
    this.#sessions = sessions
  }

  static async start (deps: DashboardDeps, host: string, port: number): Promise<DashboardServer> {
    const app = uws.App()
    const guards = new Guards(new Sessions(deps.dataDir), deps.store, { trustProxy: deps.trustProxy })
    const assets = new Assets()
    const live = new LiveFeed(app, deps.store, guards)
    const auth = new AuthRoutes(deps.store, guards, (sid) => { live.dropSession(sid) })
    const keys = new KeyRoutes(deps.store, deps.admin, guards, deps.limiter)
    const detection = new DetectionRoutes(deps.admin, guards)
    const read = new ReadApi(deps.store, deps.keys)
    const lag = new StoreLag(deps.store)
    const base: RouteOptions = {
      isClosing: deps.isClosing,
      onFault: (err) => { deps.log?.error({ err }, 'dashboard request failed') },
    }
    const routes: Array<[method: 'get' | 'post', pattern: string, handler: Handler, options?: RouteOptions]> = [
      ['post', '/api/ui/signin', auth.signIn, { json: true }],
      ['post', '/api/ui/signout', auth.signOut],
      ['get', '/api/ui/session', auth.current],
      ['get', '/api/ui/account', async (req) => ({ status: 200, body: (await auth.body(guards.session(req))).account })],
      // Where clients send their calls: the empty trace list builds its first call from this.
      ['get', '/api/ui/proxy', (req) => {
        guards.session(req)
        return { status: 200, body: { host, port: deps.proxy.port, server_keys: deps.proxy.serverKeys } }
      }],
      // How far the stored traces are behind: the banner every page shows while it is N seconds or more.
      ['get', '/api/ui/status', async (req) => {
        guards.session(req)
        return { status: 200, body: { traces_behind_s: await lag.seconds() } }
      }],
      ['get', '/api/ui/traces', async (req) => ({ status: 200, body: await listTraces(deps.store, guards.session(req).accountId, req.query) })],
      ['get', '/api/ui/traces/totals', async (req) => ({ status: 200, body: await traceTotals(deps.store, guards.session(req).accountId, req.query) })],
      ['get', '/api/ui/traces/:id', async (req) => ({ status: 200, body: await getTrace(deps.store, guards.session(req).accountId, req.params[0] ?? '') }), { params: 1 }],
      ['get', '/api/ui/usage', async (req) => ({ status: 200, body: await usage(deps.store, guards.session(req).accountId, req.query) })],
      ['get', '/api/ui/sessions', async (req) => ({ status: 200, body: await listSessions(deps.store, guards.session(req).accountId, req.query) })],
      ['get', '/api/ui/sessions/:id', async (req) => ({ status: 200, body: await getSession(deps.store, guards.session(req).accountId, req.params[0] ?? '', req.query) }), { params: 1 }],
      ['get', '/api/ui/keys', keys.list],
      ['post', '/api/ui/keys', keys.create, { json: true }],
      ['post', '/api/ui/keys/:id/revoke', keys.revoke, { params: 1 }],
      ['post', '/api/ui/keys/:id/limits', keys.updateLimits, { params: 1, json: true }],
      ['get', '/api/ui/account/limits', keys.accountLimits],
      ['post', '/api/ui/account/limits', keys.updateAccountLimits, { json: true }],
      ['get', '/api/ui/account/detection', detection.get],
      ['post', '/api/ui/account/detection', detection.update, { json: true }],
      ['get', '/api/ui/account/pii-at-rest', detection.piiAtRest],
      ['post', '/api/ui/account/pii-at-rest', detection.updatePiiAtRest, { json: true }],
      ['get', '/api/v1/traces', read.traces],
      ['get', '/api/v1/traces/totals', read.totals],
      ['get', '/api/v1/traces/:id', read.trace, { params: 1 }],
      ['get', '/api/v1/usage', read.usage],
      ['get', '/api/v1/sessions', read.sessions],
      ['get', '/api/v1/sessions/:id', read.session, { params: 1 }],
      ...PAGES.map((p): [ 'get', string, Handler ] => ['get', p, () => assets.shell()]),
      ['get', '/assets/*', (req) => assets.asset(req.path)],
    ]
    const allowed = new Map<string, string>()
    for (const [method, pattern, handler, options] of routes) {
      app[method](pattern, route(handler, { ...base, ...options }))
      const m = method.toUpperCase()
      const before = allowed.get(pattern)
      allowed.set(pattern, before === undefined ? m : `${before}, ${m}`)
    }
    // Exports stream their answer, so they are wired to uWS directly rather than through route().
    for (const [pattern, account] of [
      ['/api/ui/traces/export', (req: Req) => guards.session(req).accountId],
      ['/api/v1/traces/export', read.account],
    ] as const) {
      app.get(pattern, exportRoute(deps.store, account, base))
      allowed.set(pattern, 'GET')
    }
    for (const [pattern, allow] of allowed) app.any(pattern, answer('method_not_allowed', allow))
    app.any('/*', notFound(assets))
    const bound = await listen(app, host, port).catch(() => {
      live.close()
      throw new Error(`the dashboard cannot listen on ${host}:${port} (TRACEGATE_DASHBOARD_PORT)`)
    })
    return new DashboardServer(bound.socket, bound.port, live, guards.sessions)
  }

  /** A password reset: the user's sessions are refused from now on and their live sockets close. */
  endUserSessions (userId: string): void {
    this.#sessions.endUser(userId)
    this.#live.dropUser(userId)
  }

  /** Stops accepting and closes the live sockets; requests in flight finish. */
  close (): void {
    uws.us_listen_socket_close(this.#socket as never)
    this.#live.close()
  }
}
