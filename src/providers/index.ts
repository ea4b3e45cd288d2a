// The provider registry. A provider is one module of pure functions (src/providers/<name>.ts) and its
// side of the mock provider (src/mock-provider/<name>.ts, which the module names); adding one means
// writing those and adding it to REGISTRY.
import { alpha } from './alpha.js'
import { beta } from './beta.js'
import { gamma } from './gamma.js'
import type { Dialect, HeaderReader } from './types.js'

const REGISTRY = { alpha, beta, gamma }

export type ProviderName = keyof typeof REGISTRY
export type { AnswerSink, CallKind, ClientAnswer, ClientError, Dialect, HeaderReader, ListedModel, NativeApi, ParamRule, ReportedUsage, RequestFacts, RequestSink, RouteCall, NativeRoute, UpstreamTarget } from './types.js'

// Filled in place, so that a provider registered before the rest of tracegate loads (registerProvider)
// is seen through every import of these.
export const DIALECTS: Readonly<Record<ProviderName, Dialect>> = { ...REGISTRY }
export const PROVIDERS: readonly ProviderName[] = Object.keys(REGISTRY) as ProviderName[]
export const PROVIDER_KEY_FIELDS: readonly string[] = PROVIDERS.map((p) => DIALECTS[p].keyField)

export function isProviderName (name: string): name is ProviderName {
  return Object.hasOwn(DIALECTS, name)
}

/**
 * Adds a provider to the registry. Tables built from the registry at load (routes, configuration,
 * metrics) see it only when it is registered before they load, in every thread that reads it: the tests
 * register theirs in a module given to node with --import, which node runs in every worker thread too.
 */
export function registerProvider (dialect: Dialect): void {
  if (isProviderName(dialect.name)) throw new Error(`provider ${dialect.name} is registered already`)
  ;(DIALECTS as Record<string, Dialect>)[dialect.name] = dialect
  ;(PROVIDERS as string[]).push(dialect.name)
  ;(PROVIDER_KEY_FIELDS as string[]).push(dialect.keyField)
}

/**
 * The provider a request on a path several providers share is meant for (`GET /v1/models`): the one
 * whose SDK headers the request carries, else the one that claims no headers of its own, else the
 * first. Null when no provider serves the path.
 */
export function dialectForRequest (owners: readonly Dialect[], header: HeaderReader): Dialect | null {
  if (owners.length <= 1) return owners[0] ?? null
  return owners.find((d) => d.native.sentBySdk?.(header) === true) ??
    owners.find((d) => d.native.sentBySdk === undefined) ?? owners[0]!
}

/** The paths of every provider's models lists, each once. */
export function modelsRoutes (): string[] {
  return [...new Set(PROVIDERS.flatMap((p) => [DIALECTS[p].native.modelsRoute, ...DIALECTS[p].native.moreModelsRoutes ?? []]))]
}

/** The providers whose models list is at `path`. */
export function modelsRouteOwners (path: string): Dialect[] {
  return PROVIDERS.map((p) => DIALECTS[p]).filter((d) => d.native.modelsRoute === path || d.native.moreModelsRoutes?.includes(path) === true)
}

function topSegment (path: string): string {
  const slash = path.indexOf('/', 1)
  return slash === -1 ? path : path.slice(0, slash)
}

/**
 * The provider a request to a path none serves most likely meant, so its 404 comes in that provider's
 * shape: among the providers whose routes share the path's first segment (all when none does), as
 * dialectForRequest picks.
 */
export function dialectForPath (path: string, header: HeaderReader): Dialect {
  const all = PROVIDERS.map((p) => DIALECTS[p])
  const top = topSegment(path)
  const near = all.filter((d) => topSegment(d.native.route) === top || topSegment(d.native.modelsRoute) === top)
  return dialectForRequest(near.length > 0 ? near : all, header)!
}
