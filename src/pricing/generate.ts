// Writes src/pricing/prices.json, the repository's pricing table, from @pydantic/genai-prices (a
// maintained, offline price database; a dev dependency, never called at run time). Run with
// `npm run pricing:update`, review the diff, commit. Conditional prices take the one in force today;
// tiered prices keep their base tier (tiers start past 200k prompt tokens).
import { readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { findProvider, type ModelPrice } from '@pydantic/genai-prices'
import type { ProviderName } from '../providers/index.js'
import type { PriceEntry, PriceTable } from './index.js'

const MAIN_MODELS: Record<ProviderName, { providerId: string; models: RegExp }> = {
  alpha: { providerId: 'openai', models: /^(gpt-4o|gpt-4o-mini|gpt-4\.1(-mini|-nano)?|gpt-5(\.\d)?(-mini|-nano|-pro)?|o1|o1-mini|o3|o3-mini|o3-pro|o4-mini|gpt-3\.5-turbo|gpt-4-turbo)$/ },
  beta: { providerId: 'anthropic', models: /^claude-(3-5-haiku|3-5-sonnet|3-7-sonnet|3-haiku|3-opus|haiku-4-5|sonnet-4-\d|opus-4-\d)(-latest)?$/ },
  gamma: { providerId: 'google', models: /^gemini-(1\.5|2\.0|2\.5|3(\.\d)?)-(pro|flash|flash-lite)(-preview)?$/ },
}

function num (v: ModelPrice[string]): number | undefined {
  if (v === undefined) return undefined
  return typeof v === 'number' ? v : v.base
}

const today = new Date().toISOString().slice(0, 10)
// The package does not export its package.json; read it beside its entry point.
const entry = createRequire(import.meta.url).resolve('@pydantic/genai-prices')
const version = (JSON.parse(readFileSync(join(dirname(entry), '..', 'package.json'), 'utf8')) as { version: string }).version
const entries: PriceEntry[] = []
for (const [provider, { providerId, models }] of Object.entries(MAIN_MODELS)) {
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
      provider: provider as PriceEntry['provider'],
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
const out = fileURLToPath(new URL('../../../src/pricing/prices.json', import.meta.url))
writeFileSync(out, JSON.stringify(table, null, 2) + '\n')
process.stdout.write(`wrote ${entries.length} prices to ${out}\n`)
