// The token prices of one of @pydantic/genai-prices' models, taken out of its data once so a row is priced
// with a few multiplications: its own calcPrice re-reads and re-validates the model's whole price record on
// every call (about 16 µs), which the store worker would pay per trace. The arithmetic is the library's, for
// the usage tracegate reads (input with its cache reads and writes, output): cache tokens at their own price
// where the model has one and at the input price where not, each tiered price chosen by the whole prompt's
// size, and prices that change on a date chosen by the call's time. test/unit/pricing.test.ts checks it
// against calcPrice for every model of the three catalogues.
import type { ModelInfo, ModelPrice } from '@pydantic/genai-prices'

type Price = number | { readonly base: number; readonly tiers: ReadonlyArray<{ readonly start: number; readonly price: number }> }

export interface Rates {
  readonly input: Price
  readonly output: Price
  /** null: charged as input. */
  readonly cacheRead: Price | null
  readonly cacheWrite: Price | null
}

/** Prices in force from `from` (epoch ms; -Infinity: no start). */
interface Period { readonly from: number; readonly rates: Rates }

function price (v: ModelPrice[string]): Price | null {
  if (v === undefined) return null
  if (typeof v === 'number') return v
  return { base: v.base, tiers: [...v.tiers].sort((a, b) => a.start - b.start) }
}

function rates (p: ModelPrice): Rates {
  return { input: price(p.input_mtok) ?? 0, output: price(p.output_mtok) ?? 0, cacheRead: price(p.cache_read_mtok), cacheWrite: price(p.cache_write_mtok) }
}

/** USD per million tokens of a price, for a prompt of `prompt` tokens (a tier applies past its start). */
function perMillion (p: Price, prompt: number): number {
  if (typeof p === 'number') return p
  let v = p.base
  for (const t of p.tiers) if (prompt > t.start) v = t.price
  return v
}

export class Schedule {
  readonly #periods: readonly Period[]

  private constructor (periods: readonly Period[]) {
    this.#periods = periods
  }

  /** The model's schedule; null when its prices depend on more than a start date (the caller asks the library per call). */
  static of (info: ModelInfo): Schedule | null {
    if (!Array.isArray(info.prices)) return new Schedule([{ from: -Infinity, rates: rates(info.prices) }])
    const periods: Period[] = []
    for (const c of info.prices) {
      if (c.constraint === undefined) periods.push({ from: -Infinity, rates: rates(c.prices) })
      else if (c.constraint.type === 'start_date') periods.push({ from: new Date(c.constraint.start_date).getTime(), rates: rates(c.prices) })
      else return null
    }
    return periods.length === 0 ? null : new Schedule(periods)
  }

  /** As the library picks: the last period that has started, else the first. */
  at (ms: number): Rates {
    const p = this.#periods
    for (let i = p.length - 1; i >= 0; i--) if (ms >= p[i]!.from) return p[i]!.rates
    return p[0]!.rates
  }
}

/** USD for the counts: `input` holds the cache reads and writes; `output` holds reasoning. */
export function costOf (r: Rates, input: number, cacheRead: number, cacheWrite: number, output: number): number {
  const inPrice = perMillion(r.input, input)
  const micro = (input - cacheRead - cacheWrite) * inPrice +
    cacheRead * (r.cacheRead === null ? inPrice : perMillion(r.cacheRead, input)) +
    cacheWrite * (r.cacheWrite === null ? inPrice : perMillion(r.cacheWrite, input)) +
    output * perMillion(r.output, input)
  return micro / 1e6
}
