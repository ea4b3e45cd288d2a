// The proxy port's routes, as the JSON 404 lists them for a client that called a path tracegate does not serve.
import { TracegateError } from '../errors.js'
import { newRequestId } from '../ids.js'
import { DIALECTS, modelsRoutes, PROVIDERS } from '../providers/index.js'
import { sendError, TRACEGATE_SHAPE, type ErrorShape } from './respond.js'
import type { HttpResponse } from './uws.js'

export const PROXY_ROUTES: readonly string[] = [
  ...PROVIDERS.map((p) => `POST ${DIALECTS[p].route}`),
  ...PROVIDERS.flatMap((p) => [...DIALECTS[p].native.routeNames, ...(DIALECTS[p].native.more ?? []).flatMap((r) => r.names)]),
  ...modelsRoutes().map((path) => `GET ${path}`),
  'GET /healthz',
  'GET /readyz',
  'GET /metrics (only with TRACEGATE_METRICS_TOKEN set)',
]

/** 404 in the route's error shape, listing the routes there are. */
export function notFound (res: HttpResponse, shape: ErrorShape = TRACEGATE_SHAPE): void {
  sendError(res, new TracegateError('not_found', { extra: { routes: PROXY_ROUTES } }), newRequestId(), false, [], shape)
}
