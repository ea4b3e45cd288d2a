// What every provider dialect tells the generic proxy. Provider quirks live only in the dialect modules.
import type { ProviderName } from '../config.js'

export interface ParamRule {
  readonly name: string
  readonly type: 'string' | 'array' | 'number' | 'object'
  readonly required: boolean
}

export interface UpstreamTarget {
  /** Path and query appended to the provider's base URL. */
  readonly path: string
  readonly streaming: boolean
}

/** What the generic code learnt from the body that a dialect needs to aim the request. */
export interface RequestFacts {
  readonly model: string | null
  /** Gamma takes `stream` as a service field; the others read the provider's own `stream` parameter. */
  readonly stream: boolean
}

export interface Dialect {
  readonly name: ProviderName
  readonly route: string
  /** The body field carrying the caller's own key for this provider. */
  readonly keyField: string
  /** Fields the dialect takes out of the body besides the common service fields (gamma: model, stream). */
  readonly ownFields: readonly string[]
  /** The provider's own top-level parameters tracegate checks before forwarding (type and presence). */
  readonly params: readonly ParamRule[]
  /** Extra model rule (gamma puts the model in the URL path). */
  validModel? (model: string): boolean
  target (facts: RequestFacts): UpstreamTarget
  /** The provider's auth header(s) for a provider key. */
  authHeaders (key: string): Record<string, string>
  /** Lower-case client request headers passed on to the provider. */
  readonly forwardHeaders: ReadonlySet<string>
  /** Headers sent when the client did not send them. */
  readonly defaultHeaders: Readonly<Record<string, string>>
  /** The name under which a provider response header reaches the client, or null to drop it. */
  responseHeader (name: string): string | null
}

/** Response headers every dialect passes back. */
export function commonResponseHeader (name: string): string | null {
  return name === 'content-type' || name === 'retry-after' ? name : null
}
