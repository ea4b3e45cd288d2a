// Helpers for the trace tests: request bodies with their expected forwarded form, a client that keeps
// every byte it received (and can leave mid-stream), the usage and text the client itself saw in each
// dialect's answer, and the cost formula of DESIGN §4 / §11.
import { performance } from 'node:perf_hooks'
import { rawPost } from './stream-helpers.js'
import type { ProviderName } from '../src/providers/index.js'

export type Provider = ProviderName

/** Provider keys a client passes; distinctive, so a test can look for them in a stored row. */
export const PROVIDER_KEYS: Readonly<Record<Provider, string>> = {
  alpha: 'sk-alpha-PROVIDERSECRET-a1b2c3',
  beta: 'sk-ant-PROVIDERSECRET-d4e5f6',
  gamma: 'AIza-PROVIDERSECRET-g7h8i9',
}

const COMMON_SERVICE = ['api_key', 'is_confidential', 'alpha_api_key', 'beta_api_key', 'gamma_api_key']
const SERVICE: Readonly<Record<Provider, readonly string[]>> = {
  alpha: COMMON_SERVICE,
  beta: COMMON_SERVICE,
  gamma: [...COMMON_SERVICE, 'model', 'stream'],
}

export interface BodyOptions {
  readonly apiKey: string
  readonly model?: string
  readonly stream?: boolean
  /** alpha only: add stream_options.include_usage = true. */
  readonly includeUsage?: boolean
  readonly text: string
  readonly confidential?: boolean
  /** false: no provider key field at all. */
  readonly providerKey?: boolean
  /** Extra members, added after the provider's own. */
  readonly extra?: Record<string, unknown>
}

export interface BuiltBody {
  /** What the client sends. */
  readonly sent: string
  /** What the provider must receive: the same JSON without the service fields. */
  readonly forwarded: string
  readonly model: string
}

export const DEFAULT_MODELS: Readonly<Record<Provider, string>> = {
  alpha: 'gpt-4o-mini',
  beta: 'claude-sonnet-4-5',
  gamma: 'gemini-2.5-flash',
}

export function buildBody (provider: Provider, o: BodyOptions): BuiltBody {
  const model = o.model ?? DEFAULT_MODELS[provider]
  const b: Record<string, unknown> = {}
  switch (provider) {
    case 'alpha':
      b.model = model
      b.messages = [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: o.text }]
      if (o.stream !== undefined) b.stream = o.stream
      if (o.includeUsage === true) b.stream_options = { include_usage: true }
      break
    case 'beta':
      b.model = model
      b.max_tokens = 64
      b.messages = [{ role: 'user', content: o.text }]
      if (o.stream !== undefined) b.stream = o.stream
      break
    case 'gamma':
      b.model = model
      if (o.stream !== undefined) b.stream = o.stream
      b.contents = [{ role: 'user', parts: [{ text: o.text }] }]
      break
  }
  Object.assign(b, o.extra ?? {})
  if (o.confidential !== undefined) b.is_confidential = o.confidential
  if (o.providerKey !== false) b[`${provider}_api_key`] = PROVIDER_KEYS[provider]
  b.api_key = o.apiKey
  const forwarded: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(b)) if (!SERVICE[provider].includes(k)) forwarded[k] = v
  return { sent: JSON.stringify(b), forwarded: JSON.stringify(forwarded), model }
}

export interface Sent {
  readonly status: number
  readonly requestId: string
  readonly body: Buffer
  /** The body ended as its framing says. */
  readonly complete: boolean
  /** The client closed the connection itself (abortWhen). */
  readonly clientLeft: boolean
  /** performance.now() when the response ended (or the connection closed). */
  readonly endedAt: number
  /** Date.now() just before sending. */
  readonly sentWall: number
}

/** One POST over its own connection; `abortWhen` sees the body so far and can make the client leave. */
export async function send (port: number, path: string, body: string | Buffer, abortWhen?: (soFar: string) => boolean): Promise<Sent> {
  const sentWall = Date.now()
  const call = rawPost(port, path, body)
  const parts: Buffer[] = []
  let left = false
  call.onBody = (bytes) => {
    parts.push(bytes)
    if (abortWhen !== undefined && !left && abortWhen(Buffer.concat(parts).toString('utf8'))) {
      left = true
      call.destroy()
    }
  }
  const out = await call.done
  const endedAt = performance.now()
  const head = out.head
  return {
    status: head?.status ?? 0,
    requestId: head?.headers['x-request-id']?.[0] ?? '',
    body: Buffer.concat(parts),
    complete: out.complete,
    clientLeft: left,
    endedAt,
    sentWall,
  }
}

type Json = Record<string, any>

/** The JSON payloads of an SSE body's data lines, in order ([DONE] left out). */
export function sseData (text: string): Json[] {
  const out: Json[] = []
  for (const line of text.split(/\r\n|\n/)) {
    if (!line.startsWith('data:')) continue
    const payload = line.slice(line.startsWith('data: ') ? 6 : 5)
    if (payload === '[DONE]' || payload === '') continue
    out.push(JSON.parse(payload) as Json)
  }
  return out
}

export interface ClientUsage {
  readonly input: number
  readonly output: number
  readonly cached: number
}

/** The usage the client received in the answer, read the way each provider documents it; null if none. */
export function clientUsage (provider: Provider, streaming: boolean, body: string): ClientUsage | null {
  if (!streaming) {
    const j = JSON.parse(body) as Json
    switch (provider) {
      case 'alpha': {
        const u = j.usage
        if (u === undefined || u === null) return null
        return { input: u.prompt_tokens, output: u.completion_tokens, cached: u.prompt_tokens_details?.cached_tokens ?? 0 }
      }
      case 'beta': {
        const u = j.usage
        if (u === undefined) return null
        const cached = u.cache_read_input_tokens ?? 0
        return { input: u.input_tokens + (u.cache_creation_input_tokens ?? 0) + cached, output: u.output_tokens, cached }
      }
      case 'gamma': {
        const u = j.usageMetadata
        if (u === undefined) return null
        return { input: u.promptTokenCount, output: (u.candidatesTokenCount ?? 0) + (u.thoughtsTokenCount ?? 0), cached: u.cachedContentTokenCount ?? 0 }
      }
    }
  }
  const events = sseData(body)
  switch (provider) {
    case 'alpha': {
      const withUsage = events.filter((e) => e.usage !== undefined && e.usage !== null)
      const u = withUsage[withUsage.length - 1]?.usage
      if (u === undefined) return null
      return { input: u.prompt_tokens, output: u.completion_tokens, cached: u.prompt_tokens_details?.cached_tokens ?? 0 }
    }
    case 'beta': {
      const start = events.find((e) => e.type === 'message_start')?.message?.usage
      const deltas = events.filter((e) => e.type === 'message_delta')
      const delta = deltas[deltas.length - 1]?.usage
      if (start === undefined) return null
      const cached = start.cache_read_input_tokens ?? 0
      return {
        input: start.input_tokens + (start.cache_creation_input_tokens ?? 0) + cached,
        output: delta?.output_tokens ?? start.output_tokens,
        cached,
      }
    }
    case 'gamma': {
      const withUsage = events.filter((e) => e.usageMetadata !== undefined)
      const u = withUsage[withUsage.length - 1]?.usageMetadata
      if (u === undefined) return null
      return { input: u.promptTokenCount, output: (u.candidatesTokenCount ?? 0) + (u.thoughtsTokenCount ?? 0), cached: u.cachedContentTokenCount ?? 0 }
    }
  }
}

/** The generated text the client received. */
export function clientText (provider: Provider, streaming: boolean, body: string): string {
  const objs = streaming ? sseData(body) : [JSON.parse(body) as Json]
  let s = ''
  for (const j of objs) {
    if (provider === 'alpha') for (const c of j.choices ?? []) s += c.message?.content ?? c.delta?.content ?? ''
    if (provider === 'beta') {
      if (typeof j.delta?.text === 'string') s += j.delta.text
      for (const c of j.content ?? []) s += c.text ?? ''
    }
    if (provider === 'gamma') for (const c of j.candidates ?? []) for (const p of c.content?.parts ?? []) s += p.text ?? ''
  }
  return s
}

export interface Price {
  readonly input_per_mtok: number
  readonly output_per_mtok: number
  readonly cached_input_per_mtok: number | null
}

/** cost = ((input − cached)·in + cached·cached_in + output·out) / 1e6, rounded to 1e-11 USD. */
export function expectedCost (p: Price, input: number, cached: number, output: number): number {
  const c = Math.min(cached, input)
  const micro = (input - c) * p.input_per_mtok + c * (p.cached_input_per_mtok ?? p.input_per_mtok) + output * p.output_per_mtok
  return Math.round(micro * 1e5) / 1e11
}

/** The p-quantile (0..1) of the values, nearest rank. */
export function quantile (values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? NaN
}

/** ClickHouse's `YYYY-MM-DD hh:mm:ss[.sss]` (UTC) as epoch ms. */
export function chEpochMs (s: string): number {
  return Date.parse(s.replace(' ', 'T') + 'Z')
}
