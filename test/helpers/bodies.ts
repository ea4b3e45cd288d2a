// Request bodies for the proxy, one builder per dialect: `bodyFor` for a minimal valid body with the
// fields a test needs, `buildBody` for a conversation with its expected forwarded form; and the raw
// edits the contract and fault tests make to a body.
import { DIALECTS, PROVIDER_KEY_FIELDS, PROVIDERS, type ProviderName } from '../../src/providers/index.js'

export type Provider = ProviderName

interface TestFacts {
  readonly model: string
  /** The provider key of an ordinary client body. */
  readonly clientKey: string
  /** A provider key distinctive enough that a test can look for it in a stored row. */
  readonly secretKey: string
}

// Models the price tables know, and keys in each provider's style; a provider not named here (a test
// provider) gets keys and a model named after it.
const FACTS: Readonly<Record<string, TestFacts>> = {
  alpha: { model: 'gpt-4o-mini', clientKey: 'sk-client', secretKey: 'sk-alpha-PROVIDERSECRET-a1b2c3' },
  beta: { model: 'claude-sonnet-4-5', clientKey: 'sk-ant-client', secretKey: 'sk-ant-PROVIDERSECRET-d4e5f6' },
  gamma: { model: 'gemini-2.5-flash', clientKey: 'AIza-client', secretKey: 'AIza-PROVIDERSECRET-g7h8i9' },
}

function facts (p: Provider): TestFacts {
  return FACTS[p] ?? { model: `${p}-model-1`, clientKey: `${p}-client`, secretKey: `${p}-PROVIDERSECRET-j1k2l3` }
}

function column (value: (p: Provider) => string): Readonly<Record<Provider, string>> {
  return Object.fromEntries(PROVIDERS.map((p) => [p, value(p)])) as Record<Provider, string>
}

export const ROUTES = column((p) => DIALECTS[p].route)
export const DEFAULT_MODELS = column((p) => facts(p).model)
export const CLIENT_KEYS = column((p) => facts(p).clientKey)
export const PROVIDER_KEYS = column((p) => facts(p).secretKey)

/** The dialect's own members for one user message (and a system prompt when given). */
function conversation (provider: Provider, text: string, system: string | null): Record<string, unknown> {
  return DIALECTS[provider].sampleBody(text, system ?? undefined)
}

/** A minimal valid body for each dialect asking `text`, plus the given fields (which win). */
export function bodyFor (provider: Provider, fields: Record<string, unknown> = {}, text = 'Hello'): Record<string, unknown> {
  return { model: DEFAULT_MODELS[provider], ...conversation(provider, text, null), [`${provider}_api_key`]: CLIENT_KEYS[provider], ...fields }
}

/** The members tracegate takes out of a body before forwarding it. */
function serviceFields (provider: Provider): readonly string[] {
  return ['api_key', 'is_confidential', ...PROVIDER_KEY_FIELDS, ...DIALECTS[provider].ownFields]
}

export interface BodyOptions {
  readonly apiKey: string
  readonly model?: string
  readonly stream?: boolean
  /** alpha only: add stream_options.include_usage = true. */
  readonly includeUsage?: boolean
  readonly text: string
  /** A system prompt ("Answer briefly."), where the dialect carries one. */
  readonly system?: boolean
  readonly confidential?: boolean
  /** The provider key: PROVIDER_KEYS by default, this one, or false for no provider key field at all. */
  readonly providerKey?: string | false
  /** Extra members, added after the provider's own. */
  readonly extra?: Record<string, unknown>
}

export interface BuiltBody {
  readonly value: Record<string, unknown>
  /** What the client sends. */
  readonly sent: string
  /** What the provider must receive: the same JSON without the service fields. */
  readonly forwarded: string
  readonly model: string
}

/** A conversation body with the service fields last, and the form the provider must receive. */
export function buildBody (provider: Provider, o: BodyOptions): BuiltBody {
  const model = o.model ?? DEFAULT_MODELS[provider]
  const chat = conversation(provider, o.text, o.system === true ? 'Answer briefly.' : null)
  const b: Record<string, unknown> = { model }
  // A stream taken as a service field (gamma) comes before the conversation, the provider's own after it.
  const ownStream = DIALECTS[provider].ownFields.includes('stream')
  if (ownStream && o.stream !== undefined) b.stream = o.stream
  Object.assign(b, chat)
  if (!ownStream && o.stream !== undefined) b.stream = o.stream
  if (provider === 'alpha' && o.includeUsage === true) b.stream_options = { include_usage: true }
  Object.assign(b, o.extra ?? {})
  if (o.confidential !== undefined) b.is_confidential = o.confidential
  if (o.providerKey !== false) b[`${provider}_api_key`] = o.providerKey ?? PROVIDER_KEYS[provider]
  b.api_key = o.apiKey
  const forwarded: Record<string, unknown> = {}
  const service = serviceFields(provider)
  for (const [k, v] of Object.entries(b)) if (!service.includes(k)) forwarded[k] = v
  return { value: b, sent: JSON.stringify(b), forwarded: JSON.stringify(forwarded), model }
}

/** `value` as JSON with extra raw members spliced in before its closing brace (duplicate keys, escapes). */
export function withRawMembers (value: Record<string, unknown>, raw: string): string {
  const text = JSON.stringify(value)
  return text === '{}' ? `{${raw}}` : `${text.slice(0, -1)},${raw}}`
}

/** A copy of `value` without the named members. */
export function without (value: Record<string, unknown>, ...names: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) if (!names.includes(k)) out[k] = v
  return out
}

/** `buf` split into chunks of `size` bytes. */
export function split (buf: Buffer, size: number): Buffer[] {
  const out: Buffer[] = []
  for (let i = 0; i < buf.length; i += size) out.push(buf.subarray(i, i + size))
  return out
}

/** Prose of about `bytes` characters, different for every `seed`, with no attack in it. */
export function prose (bytes: number, seed: number): string {
  const words = ['report', 'quarter', 'sales', 'region', 'growth', 'customer', 'order', 'shipping', 'invoice', 'meeting', 'budget', 'forecast', 'team', 'product', 'market', 'review']
  const out: string[] = []
  let n = 0
  let x = seed * 2654435761 >>> 0
  while (n < bytes) {
    x = (x * 1103515245 + 12345) >>> 0
    const w = words[x % words.length]!
    out.push(w)
    n += w.length + 1
  }
  return out.join(' ')
}
