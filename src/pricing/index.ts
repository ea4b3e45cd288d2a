// The cost of a call from its token counts, priced by @pydantic/genai-prices with its own model matching
// (dated versions, aliases, `-latest`) and its own price rules (tiers past a prompt size, cache reads and
// writes, prices that change on a date; rates.ts), from the data bundled with the package, never fetched.
// An operator's file (TRACEGATE_PRICING_FILE) wins model by model. A model neither prices has no cost.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { ModelInfo, Provider } from '@pydantic/genai-prices'
import { DIALECTS, isProviderName, PROVIDERS, type ListedModel, type ProviderName } from '../providers/index.js'
import { costOf, Schedule } from './rates.js'

/** An operator's price, per million tokens. */
export interface PriceEntry {
  readonly provider: ProviderName
  readonly model: string
  readonly input_per_mtok: number
  readonly output_per_mtok: number
  /** Input tokens read from the provider's prompt cache; null or absent: charged as input. */
  readonly cached_input_per_mtok?: number | null
  /** Input tokens written to the provider's prompt cache (beta); null or absent: charged as input. */
  readonly cache_write_per_mtok?: number | null
  /** The day the operator recorded this price (shown as the model's date in the models lists). */
  readonly as_of?: string
}

export interface PriceTable {
  readonly prices: readonly PriceEntry[]
}

export interface Usage {
  /** All input tokens: cache reads and cache writes included. */
  readonly input: number
  /** All output tokens: reasoning ("thinking") tokens included. */
  readonly output: number
  /** The part of `input` read from the prompt cache. */
  readonly cached: number
  /** The part of `input` written to the prompt cache. */
  readonly cacheWrite?: number
}

export type CostStatus = 'priced' | 'unknown_model'

export class PricingError extends Error {
  override name = 'PricingError'
}

/** How a (provider, model name) is priced: by the operator's entry, by one of the library's models, or not. */
type Resolved =
  | { readonly id: string; readonly entry: PriceEntry }
  | { readonly id: string; readonly entry: null; readonly schedule: Schedule | null; readonly library: Provider; readonly name: string }

/** Names remembered per Pricing: a client that invents names cannot grow it past this. */
const CACHE_MAX = 10_000
/** An operator's entry also prices its dated versions (`m-2025-01-31`, `m-20250131`, `m@20250131`, `m-latest`). */
const VERSION_SUFFIX = /^(?:[-@]\d{4}-?\d{2}-?\d{2}|-latest)$/

function validEntry (e: unknown): e is PriceEntry {
  const x = e as Record<string, unknown>
  const price = (v: unknown): boolean => typeof v === 'number' && Number.isFinite(v) && v >= 0
  const optional = (v: unknown): boolean => v === null || v === undefined || price(v)
  return typeof x === 'object' && x !== null && typeof x.provider === 'string' && isProviderName(x.provider) &&
    typeof x.model === 'string' && x.model !== '' && price(x.input_per_mtok) && price(x.output_per_mtok) &&
    optional(x.cached_input_per_mtok) && optional(x.cache_write_per_mtok) && (x.as_of === undefined || typeof x.as_of === 'string')
}

export function readTable (file: string): PriceTable {
  let parsed: unknown
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'))
  } catch (err) {
    throw new PricingError(`cannot read the pricing file ${file}: ${(err as Error).message}`)
  }
  const prices = (parsed as { prices?: unknown } | null)?.prices
  if (!Array.isArray(prices)) throw new PricingError(`${file} must hold {"prices": [...]}`)
  prices.forEach((e, i) => {
    if (!validEntry(e)) throw new PricingError(`${file}: entry ${i} needs provider (alpha|beta|gamma), model, input_per_mtok, output_per_mtok, and optionally cached_input_per_mtok, cache_write_per_mtok, as_of`)
  })
  return { prices: prices as PriceEntry[] }
}

/** The name as providers spell it in a trace: gamma's path form `models/x` is the model `x`. */
function bareName (model: string): string {
  const id = model.trim().toLowerCase()
  return id.startsWith('models/') ? id.slice(7) : id
}

const LIBRARY_DAY = '1970-01-01'

type Library = typeof import('@pydantic/genai-prices')
let loaded: Library | null = null
/** Loaded when the first Pricing is made (its data take a few hundred ms to parse): CLI commands that price nothing never pay it. */
function lib (): Library {
  loaded ??= createRequire(import.meta.url)('@pydantic/genai-prices') as Library
  return loaded
}

const round = (usd: number): number => Math.round(usd * 1e11) / 1e11

export class Pricing {
  /** The operator's entries per provider, by lower-case model name. */
  readonly #operator = new Map<ProviderName, Map<string, PriceEntry>>()
  readonly #library = new Map<ProviderName, Provider | undefined>()
  readonly #resolved = new Map<string, Resolved | null>()

  /** `operator`: entries that win over the library's prices (later ones over earlier ones). */
  constructor (operator: readonly PriceTable[] = []) {
    for (const t of operator) {
      for (const e of t.prices) {
        let m = this.#operator.get(e.provider)
        if (m === undefined) { m = new Map(); this.#operator.set(e.provider, m) }
        m.set(bareName(e.model), e)
      }
    }
    for (const p of PROVIDERS) this.#library.set(p, lib().findProvider({ providerId: DIALECTS[p].priceProvider }))
  }

  static load (operatorFile: string | null): Pricing {
    return new Pricing(operatorFile === null ? [] : [readTable(operatorFile)])
  }

  /** The models a provider's calls can be priced for, by id: what the models routes list. */
  models (provider: ProviderName): ListedModel[] {
    const out = new Map<string, ListedModel>()
    // The library does not say when a model was released: its models carry the epoch as their date.
    for (const m of this.#library.get(provider)?.models ?? []) out.set(m.id, { id: m.id, asOf: LIBRARY_DAY })
    for (const e of this.#operator.get(provider)?.values() ?? []) out.set(e.model, { id: e.model, asOf: e.as_of ?? LIBRARY_DAY })
    return [...out.values()].sort((a, b) => a.id.localeCompare(b.id))
  }

  /** The id a model is priced as (the operator's entry or the library's model), or null when unpriced. */
  find (provider: ProviderName, model: string): { readonly model: string } | null {
    const r = this.#resolve(provider, model)
    return r === null ? null : { model: r.id }
  }

  /**
   * The cost in USD, rounded to a billionth of a cent (float noise never reaches a stored cost). `atMs`:
   * when the call was made, for prices that change on a date (default now).
   */
  cost (provider: ProviderName, model: string, usage: Usage, atMs?: number): { costUsd: number | null; status: CostStatus } {
    const r = this.#resolve(provider, model)
    if (r === null) return { costUsd: null, status: 'unknown_model' }
    const input = Math.max(0, usage.input)
    const cached = Math.min(Math.max(0, usage.cached), input)
    const written = Math.min(Math.max(0, usage.cacheWrite ?? 0), input - cached)
    const output = Math.max(0, usage.output)
    if (r.entry !== null) {
      const e = r.entry
      const micro = (input - cached - written) * e.input_per_mtok + cached * (e.cached_input_per_mtok ?? e.input_per_mtok) +
        written * (e.cache_write_per_mtok ?? e.input_per_mtok) + output * e.output_per_mtok
      return { costUsd: round(micro / 1e6), status: 'priced' }
    }
    const at = atMs ?? Date.now()
    if (r.schedule !== null) return { costUsd: round(costOf(r.schedule.at(at), input, cached, written, output)), status: 'priced' }
    const priced = lib().calcPrice({ input_tokens: input, cache_read_tokens: cached, cache_write_tokens: written, output_tokens: output },
      r.name, { provider: r.library, timestamp: new Date(at) })
    return priced === null ? { costUsd: null, status: 'unknown_model' } : { costUsd: round(priced.total_price), status: 'priced' }
  }

  #resolve (provider: ProviderName, model: string): Resolved | null {
    const key = provider + '\n' + model
    const known = this.#resolved.get(key)
    if (known !== undefined) return known
    const r = this.#match(provider, model)
    if (this.#resolved.size < CACHE_MAX) this.#resolved.set(key, r)
    return r
  }

  #match (provider: ProviderName, model: string): Resolved | null {
    const name = bareName(model)
    const own = this.#operator.get(provider)
    if (own !== undefined) {
      const exact = own.get(name)
      if (exact !== undefined) return { id: exact.model, entry: exact }
      for (const [base, e] of own) {
        if (name.startsWith(base) && VERSION_SUFFIX.test(name.slice(base.length))) return { id: e.model, entry: e }
      }
    }
    const library = this.#library.get(provider)
    if (library === undefined) return null
    // The library's own matching, once per name; the answer keeps the model it found and its prices.
    const found = lib().calcPrice({ input_tokens: 0, output_tokens: 0 }, name, { provider: library })
    if (found === null) return null
    const info: ModelInfo = found.model
    // An operator's entry for the library's id wins for every name the library takes as that model.
    const override = own?.get(info.id.toLowerCase())
    if (override !== undefined) return { id: override.model, entry: override }
    const single: Provider = { id: library.id, name: library.name, api_pattern: library.api_pattern, models: [info] }
    return { id: info.id, entry: null, schedule: Schedule.of(info), library: single, name }
  }
}
