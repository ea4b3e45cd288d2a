// The proxy port: the three provider routes, health and readiness, and JSON 404/405 for the rest. Every
// route refuses a head with ambiguous framing (head.ts); the provider routes check it themselves.
import { TracegateError } from '../errors.js'
import { newRequestId } from '../ids.js'
import { DIALECTS } from '../providers/index.js'
import { proxyRoute, type ProxyDeps } from '../proxy/handler.js'
import { framed } from './head.js'
import { sendError, sendJson, type Headers } from './respond.js'
import { uws, type HttpResponse, type TemplatedApp } from './uws.js'

export interface NotReady {
  readonly reason: 'store_unreachable' | 'trace_inserts_failing' | 'spool_refusing'
  readonly message: string
}

export interface ProxyAppDeps extends ProxyDeps {
  /** Resolves null when ready, else why not (a stable reason and a message for people). */
  ready (): Promise<NotReady | null>
  /** The Prometheus text of the process metrics. */
  metrics (): Promise<string>
}

function methodNotAllowed (allow: string) {
  const err = new TracegateError('method_not_allowed', { message: `Use ${allow}.` })
  const headers: Headers = [['allow', allow]]
  return (res: HttpResponse): void => {
    sendError(res, err, newRequestId(), false, headers)
  }
}

export function createProxyApp (deps: ProxyAppDeps): TemplatedApp {
  const app = uws.App()
  for (const dialect of Object.values(DIALECTS)) {
    app.post(dialect.route, proxyRoute(dialect, deps))
    app.any(dialect.route, framed(methodNotAllowed('POST')))
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
    void deps.ready().then((not) => {
      if (aborted) return
      if (not === null) sendJson(res, 200, '{"status":"ready"}', id)
      else sendError(res, new TracegateError('service_unavailable', { message: not.message, extra: { reason: not.reason } }), id)
    })
  }))
  app.get('/metrics', framed((res) => {
    const id = newRequestId()
    let aborted = false
    res.onAborted(() => { aborted = true })
    deps.metrics().then((text) => {
      if (aborted) return
      res.cork(() => {
        res.writeStatus('200 OK').writeHeader('content-type', 'text/plain; version=0.0.4').writeHeader('x-request-id', id).end(text)
      })
    }, () => {
      if (!aborted) sendError(res, 'internal_error', id)
    })
  }))
  app.any('/metrics', framed(methodNotAllowed('GET')))
  app.any('/healthz', framed(methodNotAllowed('GET')))
  app.any('/readyz', framed(methodNotAllowed('GET')))
  app.any('/*', framed((res) => {
    sendError(res, 'not_found', newRequestId())
  }))
  return app
}
