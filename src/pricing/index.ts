// The cost of a call from its token counts: the repository's pricing table (prices.json, per million
// tokens, each price with its date), with an operator's file (TRACEGATE_PRICING_FILE, same shape)
// winning entry by entry. A model in neither has no cost, and the trace says so.
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { repoFile } from '../paths.js'
import { isProviderName, type ListedModel, type ProviderName } from '../providers/index.js'

export interface PriceEntry {
  readonly provider: ProviderName
  readonly model: string
  readonly input_per_mtok: number
  readonly output_per_mtok: number
  /** Price of input tokens served from the provider's prompt cache; null: charged as input. */
  readonly cached_input_per_mtok: number | null
  /** The day this price was recorded. */
  readonly as_of: string
}

export interface PriceTable {
  readonly source?: string
  readonly prices: readonly PriceEntry[]
}

export interface Usage {
  /** All input tokens, cached ones included. */
  readonly input: number
  readonly output: number
  /** The part of `input` read from the prompt cache. */
  readonly cached: number
}

export type CostStatus = 'priced' | 'unknown_model'

export const TABLE_FILE = fileURLToPath(repoFile('src/pricing/prices.json'))

export class PricingError extends Error {
  override name = 'PricingError'
}

function validEntry (e: unknown): e is PriceEntry {
  const x = e as Record<string, unknown>
  const price = (v: unknown): boolean => typeof v === 'number' && Number.isFinite(v) && v >= 0
  return typeof x === 'object' && x !== null && typeof x.provider === 'string' && isProviderName(x.provider) &&
    typeof x.model === 'string' && x.model !== '' && price(x.input_per_mtok) && price(x.output_per_mtok) &&
    (x.cached_input_per_mtok === null || x.cached_input_per_mtok === undefined || price(x.cached_input_per_mtok))
}

export function readTable (file: string): PriceTable {
  let parsed: unknown
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'))
  } catch (err) {
    throw new PricingError(`cannot read the pricing table ${file}: ${(err as Error).message}`)
  }
  const prices = (parsed as { prices?: unknown }).prices
  if (!Array.isArray(prices)) throw new PricingError(`${file} must hold {"prices": [...]}`)
  prices.forEach((e, i) => {
    if (!validEntry(e)) throw new PricingError(`${file}: entry ${i} needs provider (alpha|beta|gamma), model, input_per_mtok, output_per_mtok, and optionally cached_input_per_mtok`)
  })
  return { prices: prices as PriceEntry[] }
}

export class Pricing {
  readonly #byProvider = new Map<ProviderName, Map<string, PriceEntry>>()

  constructor (tables: readonly PriceTable[]) {
    // Later tables win: the operator's file is passed after the repository's.
    for (const t of tables) {
      for (const e of t.prices) {
        let m = this.#byProvider.get(e.provider)
        if (m === undefined) { m = new Map(); this.#byProvider.set(e.provider, m) }
        m.set(e.model.toLowerCase(), e)
      }
    }
  }

  static load (operatorFile: string | null): Pricing {
    const tables = [readTable(TABLE_FILE)]
    if (operatorFile !== null) tables.push(readTable(operatorFile))
    return new Pricing(tables)
  }

  /** The models a provider has a price for, by id: what the models routes list. */
  models (provider: ProviderName): ListedModel[] {
    const m = this.#byProvider.get(provider)
    if (m === undefined) return []
    return [...m.values()].map((e) => ({ id: e.model, asOf: e.as_of ?? '' })).sort((a, b) => a.id.localeCompare(b.id))
  }

  /** The entry for a model: exact id, else the longest entry that the id extends (`gpt-4o-2024-08-06` → `gpt-4o`). */
  find (provider: ProviderName, model: string): PriceEntry | null {
    const m = this.#byProvider.get(provider)
    if (m === undefined) return null
    let id = model.toLowerCase()
    if (id.startsWith('models/')) id = id.slice(7)
    const exact = m.get(id)
    if (exact !== undefined) return exact
    let best: PriceEntry | null = null
    for (const [name, e] of m) {
      if (id.startsWith(name) && /^[-@:.]/.test(id.slice(name.length)) && (best === null || name.length > best.model.length)) best = e
    }
    return best
  }

  cost (provider: ProviderName, model: string, usage: Usage): { costUsd: number | null; status: CostStatus } {
    const e = this.find(provider, model)
    if (e === null) return { costUsd: null, status: 'unknown_model' }
    const cached = Math.min(usage.cached, usage.input)
    const cachedPrice = e.cached_input_per_mtok ?? e.input_per_mtok
    const micro = (usage.input - cached) * e.input_per_mtok + cached * cachedPrice + usage.output * e.output_per_mtok
    // Rounded to a billionth of a cent: float noise (0.00001754999…) never reaches a stored cost.
    return { costUsd: Math.round(micro * 1e5) / 1e11, status: 'priced' }
  }
}
