// GET /metrics: the Prometheus text, on the metrics port (TRACEGATE_METRICS_PORT) and, with
// TRACEGATE_METRICS_TOKEN set, on the proxy port too. The token, when set, is asked for wherever the
// route is served; without one the route is never open on the proxy port (it answers 404 there).
import { timingSafeEqual, createHash } from 'node:crypto'
import { TracegateError } from '../errors.js'
import { newRequestId } from '../ids.js'
import { framed } from './head.js'
import { sendError } from './respond.js'
import { uws, type HttpRequest, type HttpResponse, type TemplatedApp } from './uws.js'

export interface MetricsEndpoint {
  /** The Prometheus text of the process metrics. */
  render (): Promise<string>
  readonly contentType: string
  /** The bearer token scrapes must send, or null (only on the metrics port). */
  readonly token: string | null
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest()

/** Compared as digests: equal lengths for timingSafeEqual, and no early exit on the first byte. */
function tokenMatches (header: string, expected: Buffer): boolean {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header)
  return m !== null && timingSafeEqual(digest(m[1]!), expected)
}

export function metricsRoute (m: MetricsEndpoint) {
  const expected = m.token === null ? null : digest(m.token)
  return (res: HttpResponse, req: HttpRequest): void => {
    const id = newRequestId()
    if (expected !== null && !tokenMatches(req.getHeader('authorization'), expected)) {
      sendError(res, 'unauthorized', id, false, [['www-authenticate', 'Bearer realm="tracegate metrics"']])
      return
    }
    let aborted = false
    res.onAborted(() => { aborted = true })
    m.render().then((text) => {
      if (aborted) return
      res.cork(() => {
        res.writeStatus('200 OK').writeHeader('content-type', m.contentType).writeHeader('x-request-id', id).writeHeader('request-id', id).end(text)
      })
    }, () => {
      if (!aborted) sendError(res, 'internal_error', id)
    })
  }
}

/** The proxy port's /metrics while no token is set: not served, and the answer says where it is. */
export function metricsNotHere (res: HttpResponse): void {
  sendError(res, new TracegateError('not_found', {
    message: 'Metrics are not served on the proxy port: set TRACEGATE_METRICS_PORT, or TRACEGATE_METRICS_TOKEN to serve them here behind a bearer token.',
  }), newRequestId())
}

/** The metrics port: /metrics, and JSON 404 for anything else. */
export function createMetricsApp (m: MetricsEndpoint): TemplatedApp {
  const app = uws.App()
  app.get('/metrics', framed(metricsRoute(m)))
  app.any('/*', framed((res) => {
    sendError(res, new TracegateError('not_found', { extra: { routes: ['GET /metrics'] } }), newRequestId())
  }))
  return app
}

