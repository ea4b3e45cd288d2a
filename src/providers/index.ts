// The provider registry. A provider is one module of pure functions (src/providers/<name>.ts); adding
// one means writing that module and adding it to REGISTRY.
import { alpha } from './alpha.js'
import { beta } from './beta.js'
import { gamma } from './gamma.js'
import type { Dialect } from './types.js'

const REGISTRY = { alpha, beta, gamma }

export type ProviderName = keyof typeof REGISTRY
export type { AnswerSink, ClientAnswer, ClientError, Dialect, ListedModel, NativeApi, ParamRule, ReportedUsage, RequestFacts, RequestSink, UpstreamTarget } from './types.js'

export const DIALECTS: Readonly<Record<ProviderName, Dialect>> = REGISTRY
export const PROVIDERS: readonly ProviderName[] = Object.keys(REGISTRY) as ProviderName[]
export const PROVIDER_KEY_FIELDS: readonly string[] = Object.values(DIALECTS).map((d) => d.keyField)

export function isProviderName (name: string): name is ProviderName {
  return Object.hasOwn(REGISTRY, name)
}
