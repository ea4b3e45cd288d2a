// What a client itself saw in each dialect's answer (its usage and generated text), the cost formula of
// the trace contract, and the small measures the trace tests compare stored rows with.
import { DIALECTS, type ReportedUsage } from '../../src/providers/index.js'
import type { Provider } from './bodies.js'
import { sseData } from './sse.js'

type Json = Record<string, any>

export interface ClientUsage {
  readonly input: number
  readonly output: number
  readonly cached: number
}

/** What a provider without a reading of its own here (a test provider) reports, read by its module. */
function moduleUsage (provider: Provider, objects: readonly Json[]): ClientUsage | null {
  const u: ReportedUsage = { input: 0, output: 0, cached: 0, cacheWrite: 0 }
  let found = false
  for (const j of objects) if (DIALECTS[provider].readUsage(j, u)) found = true
  return found ? { input: u.input, output: u.output, cached: u.cached } : null
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
      default: return moduleUsage(provider, [j])
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
    default: return moduleUsage(provider, events)
  }
}

/** The generated text the client received. */
export function clientText (provider: Provider, streaming: boolean, body: string): string {
  const objs = streaming ? sseData(body) : [JSON.parse(body) as Json]
  const builtIn = provider === 'alpha' || provider === 'beta' || provider === 'gamma'
  const dialect = DIALECTS[provider]
  let s = ''
  for (const j of objs) {
    if (!builtIn) s += dialect.generatedText(j)
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
