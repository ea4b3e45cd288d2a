// The CPU of pricing one row, as the store worker does per trace: Pricing.cost over a mix of model names
// (base ids, dated versions, gamma's models/ form, one unpriced), the match cached after its first call.
// Settings: BENCH_PRICING_CALLS (default 2,000,000), BENCH_PRICING_MODULE (another build's
// dist/src/pricing/index.js, to compare: anything with Pricing.load(null).cost(provider, model, usage)).
// Prints one JSON line: ns per call.
import { pathToFileURL } from 'node:url'
import { resolve } from 'node:path'

interface Priced { cost (provider: string, model: string, usage: { input: number; output: number; cached: number }): { costUsd: number | null } }
interface PricingModule { Pricing: { load (file: string | null): Priced } }

const calls = Number(process.env.BENCH_PRICING_CALLS ?? 2_000_000)
const modulePath = process.env.BENCH_PRICING_MODULE
const mod = (modulePath === undefined
  ? await import('../src/pricing/index.js')
  : await import(pathToFileURL(resolve(modulePath)).href)) as PricingModule

const NAMES: ReadonlyArray<readonly [string, string]> = [
  ['alpha', 'gpt-4o-mini'], ['alpha', 'gpt-4o-2024-08-06'], ['alpha', 'gpt-4.1'], ['alpha', 'o3-mini'],
  ['beta', 'claude-sonnet-4-5'], ['beta', 'claude-3-5-haiku-20241022'], ['beta', 'claude-haiku-4-5'],
  ['gamma', 'gemini-2.5-flash'], ['gamma', 'models/gemini-2.5-pro'], ['alpha', 'mock-unknown-model'],
]

const pricing = mod.Pricing.load(null)
let sink = 0
const run = (n: number): number => {
  const start = process.cpuUsage()
  for (let i = 0; i < n; i++) {
    const [p, m] = NAMES[i % NAMES.length]!
    sink += pricing.cost(p, m, { input: 1000 + (i & 1023), output: 200 + (i & 255), cached: i & 511 }).costUsd ?? 0
  }
  const used = process.cpuUsage(start)
  return (used.user + used.system) * 1000 / n
}
run(Math.min(calls, 100_000)) // warm-up: the JIT and the name cache
const nsPerCall = run(calls)
process.stdout.write(JSON.stringify({ case: 'pricing', module: modulePath ?? 'this build', calls, ns_per_call: Math.round(nsPerCall), sink: sink > 0 }) + '\n')
