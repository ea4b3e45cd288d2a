// Writes src/pricing/prices.json, the repository's pricing table, from @pydantic/genai-prices (a
// maintained, offline price database; a dev dependency, never called at run time). Run with
// `npm run pricing:update`, review the diff, commit. Conditional prices take the one in force today;
// tiered prices keep their base tier (tiers start past 200k prompt tokens).
import { readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { createRequire } from 'node:module'
import { findProvider, type ModelPrice } from '@pydantic/genai-prices'
import { DIALECTS, PROVIDERS } from '../providers/index.js'
import { TABLE_FILE, type PriceEntry, type PriceTable } from './index.js'

function num (v: ModelPrice[string]): number | undefined {
  if (v === undefined) return undefined
  return typeof v === 'number' ? v : v.base
}

const today = new Date().toISOString().slice(0, 10)
// The package does not export its package.json; read it beside its entry point.
const entry = createRequire(import.meta.url).resolve('@pydantic/genai-prices')
const version = (JSON.parse(readFileSync(join(dirname(entry), '..', 'package.json'), 'utf8')) as { version: string }).version
const entries: PriceEntry[] = []
for (const { name: provider, priceCatalog: { id: providerId, models } } of PROVIDERS.map((p) => DIALECTS[p])) {
  const p = findProvider({ providerId })
  if (p === undefined) throw new Error(`genai-prices has no provider ${providerId}`)
  for (const m of p.models) {
    const id = m.id.replace(/-latest$/, '')
    if (!models.test(m.id) || entries.some((e) => e.provider === provider && e.model === id)) continue
    let prices: ModelPrice
    if (Array.isArray(m.prices)) {
      const inForce = m.prices.filter((c) => c.constraint === undefined || (c.constraint.type === 'start_date' && c.constraint.start_date <= today))
      prices = (inForce[inForce.length - 1] ?? m.prices[0]!).prices
    } else {
      prices = m.prices
    }
    const input = num(prices.input_mtok)
    const output = num(prices.output_mtok)
    if (input === undefined || output === undefined) continue
    const cached = num(prices.cache_read_mtok)
    entries.push({
      provider,
      model: id,
      input_per_mtok: input,
      output_per_mtok: output,
      cached_input_per_mtok: cached ?? null,
      as_of: today,
    })
  }
}
entries.sort((a, b) => a.provider.localeCompare(b.provider) || a.model.localeCompare(b.model))
const table: PriceTable = { source: `@pydantic/genai-prices ${version}, prices in USD per million tokens`, prices: entries }
const out = TABLE_FILE
writeFileSync(out, JSON.stringify(table, null, 2) + '\n')
process.stdout.write(`wrote ${entries.length} prices to ${out}\n`)
