// The proxy port: each provider's contract route and its native routes (the provider's own paths, for
// SDKs), the models lists, health and readiness, and JSON 404/405 for the rest. Every route refuses a
// head with ambiguous framing (head.ts); the provider routes check it themselves.
import { authenticate, type KeyVerdict } from '../auth/authenticate.js'
import { TracegateError } from '../errors.js'
import { newRequestId } from '../ids.js'
import type { Pricing } from '../pricing/index.js'
import { dialectForRequest, DIALECTS, modelsRouteOwners, modelsRoutes, type Dialect } from '../providers/index.js'
import { readNativeKeys } from '../proxy/caller.js'
import { proxyRoute, type ProxyDeps } from '../proxy/handler.js'
import { planRefusal } from '../proxy/plan-rule.js'
import { framed } from './head.js'
import { metricsNotHere, metricsRoute, type MetricsEndpoint } from './metrics-app.js'
import { asTracegateError, nativeShape, sendError, sendJson, TRACEGATE_SHAPE, type ErrorShape, type Headers } from './respond.js'
import { notFound } from './routes.js'
import { uws, type HttpRequest, type HttpResponse, type TemplatedApp } from './uws.js'

export interface NotReady {
  readonly reason: 'store_unreachable' | 'trace_inserts_failing' | 'spool_refusing' | 'detection_not_warm' | 'shutting_down'
  readonly message: string
}

/** A detection pool whose workers have not answered yet: its checks would all miss the deadline. */
export const DETECTION_COLD: NotReady = Object.freeze({ reason: 'detection_not_warm', message: 'The detection workers have not loaded yet.' })

/** What /readyz answers: whether the instance should get traffic, and how far its stored traces are behind. */
export interface ReadyState {
  /** Null when ready, else why not (a stable reason and a message for people). */
  readonly not: NotReady | null
  /** TraceStats.lag in seconds; null when the store did not say. */
  readonly tracesBehindS: { readonly clickhouse: number; readonly dashboard: number } | null
}

export interface ProxyAppDeps extends ProxyDeps {
  ready (): Promise<ReadyState>
  /** /metrics on this port, behind its bearer token; null: not served here (404). */
  readonly metrics: MetricsEndpoint | null
  /** The price table: the models routes list the models it prices. */
  readonly pricing: Pricing
}

function methodNotAllowed (allow: string, shape: ErrorShape = TRACEGATE_SHAPE) {
  const err = new TracegateError('method_not_allowed', { message: `Use ${allow}.` })
  const headers: Headers = [['allow', allow]]
  return (res: HttpResponse): void => {
    sendError(res, err, newRequestId(), false, headers, shape)
  }
}

/** The provider a models list is asked of: where providers share the path, the one whose SDK sent the request. */
function modelsDialect (path: string, req: HttpRequest): Dialect | null {
  return dialectForRequest(modelsRouteOwners(path), (name) => req.getHeader(name))
}

/**
 * GET the models list in the provider's shape: the models tracegate can price. It needs a valid proxy
 * key, sent as the SDK sends it, of an account whose plan has the proxy (plan-rule.ts), and never calls
 * the provider.
 */
function modelsRoute (deps: ProxyAppDeps, path: string) {
  return (res: HttpResponse, req: HttpRequest): void => {
    const dialect = modelsDialect(path, req)!
    const shape = nativeShape(dialect)
    const id = newRequestId()
    const query = req.getQuery() ?? ''
    const keys = readNativeKeys(dialect, req, query === '' ? null : new URLSearchParams(query))
    let aborted = false
    res.onAborted(() => { aborted = true })
    const answer = (verdict: KeyVerdict): void => {
      if (aborted) return
      // The list is the proxy's: a key that may not call (its plan) may not list either.
      const refused = verdict instanceof TracegateError ? verdict : planRefusal(verdict)
      if (refused !== null) { sendError(res, refused, id, false, [], shape); return }
      sendJson(res, 200, dialect.native.modelList(deps.pricing.models(dialect.name)), id)
    }
    if (keys.tracegateKey === null) { sendError(res, 'missing_tracegate_key', id, false, [], shape); return }
    if (keys.conflict !== null) { sendError(res, keys.conflict, id, false, [], shape); return }
    const verdict = authenticate(deps.keys, keys.tracegateKey, 'proxy')
    if (verdict instanceof Promise) verdict.then(answer, (err: unknown) => { if (!aborted) sendError(res, asTracegateError(err), id, false, [], shape) })
    else answer(verdict)
  }
}

export function createProxyApp (deps: ProxyAppDeps): TemplatedApp {
  const app = uws.App()
  for (const dialect of Object.values(DIALECTS)) {
    app.post(dialect.route, proxyRoute(dialect, deps))
    app.any(dialect.route, framed(methodNotAllowed('POST')))
    const shape = nativeShape(dialect)
    app.post(dialect.native.route, proxyRoute(dialect, deps, true))
    app.any(dialect.native.route, framed(methodNotAllowed('POST', shape)))
    // The provider's other routes, each by its own method; another method on their paths answers 405
    // naming those it serves, as the main route does.
    const allowed = new Map<string, string[]>()
    for (const route of dialect.native.more ?? []) {
      const handler = proxyRoute(dialect, deps, true, route)
      if (route.method === 'get') app.get(route.pattern, handler)
      else if (route.method === 'del') app.del(route.pattern, handler)
      else app.post(route.pattern, handler)
      const methods = allowed.get(route.pattern) ?? []
      methods.push(route.method === 'del' ? 'DELETE' : route.method.toUpperCase())
      allowed.set(route.pattern, methods)
    }
    for (const [pattern, methods] of allowed) app.any(pattern, framed(methodNotAllowed(methods.join(', '), shape)))
  }
  for (const path of modelsRoutes()) {
    app.get(path, framed(modelsRoute(deps, path)))
    // A native route: its 405 comes in the shape of the SDK that asked.
    app.any(path, framed((res, req) => { methodNotAllowed('GET', nativeShape(modelsDialect(path, req)!))(res) }))
  }
  app.get('/healthz', framed((res) => {
    sendJson(res, 200, '{"status":"ok"}', newRequestId())
  }))
  app.get('/readyz', framed((res) => {
    const id = newRequestId()
    let aborted = false
    res.onAborted(() => { aborted = true })
    if (deps.isClosing()) {
      sendError(res, new TracegateError('service_unavailable', { extra: { reason: 'shutting_down' } }), id)
      return
    }
    void deps.ready().then(({ not, tracesBehindS }) => {
      if (aborted) return
      if (not !== null) {
        sendError(res, new TracegateError('service_unavailable', { message: not.message, extra: { reason: not.reason } }), id)
        return
      }
      // Ready, how far the stored traces are behind, and with Redis configured whether the limits are
      // shared or each instance's own (fallback).
      const limits = deps.limiter?.mode ?? 'local'
      const body: Record<string, unknown> = { status: 'ready', traces_behind_s: tracesBehindS }
      if (limits !== 'local') body.limits = limits
      sendJson(res, 200, JSON.stringify(body), id)
    })
  }))
  app.get('/metrics', framed(deps.metrics === null ? metricsNotHere : metricsRoute(deps.metrics)))
  app.any('/metrics', framed(methodNotAllowed('GET')))
  app.any('/healthz', framed(methodNotAllowed('GET')))
  app.any('/readyz', framed(methodNotAllowed('GET')))
  app.any('/*', framed((res) => { notFound(res) }))
  return app
}
