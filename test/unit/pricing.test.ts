// The cost of real usage blocks, as each provider sends them (whole answers and streams, with cache reads,
// cache writes and reasoning tokens), read as the store worker reads them and priced by the library, against
// the providers' published prices written here per million tokens (never read from the library).
import t from 'tap'
import { calcPrice, findProvider } from '@pydantic/genai-prices'
import { Pricing } from '../../src/pricing/index.js'
import type { ProviderName } from '../../src/providers/index.js'
import { readResponse } from '../../src/store/worker/token-usage.js'

/** A price page's line: USD per million tokens; absent cache prices are charged as input. */
interface Published { readonly input: number; readonly output: number; readonly cacheRead?: number; readonly cacheWrite?: number }

// OpenAI (platform.openai.com/pricing), Anthropic (anthropic.com/pricing, 5-minute cache writes), Google (ai.google.dev/pricing).
const GPT_4O: Published = { input: 2.5, cacheRead: 1.25, output: 10 }
const GPT_4O_MINI: Published = { input: 0.15, cacheRead: 0.075, output: 0.6 }
const GPT_4_1: Published = { input: 2, cacheRead: 0.5, output: 8 }
const GPT_4: Published = { input: 30, output: 60 }
const GPT_4_32K: Published = { input: 60, output: 120 }
const O1: Published = { input: 15, cacheRead: 7.5, output: 60 }
const O1_PRO: Published = { input: 150, output: 600 }
const O3_MINI: Published = { input: 1.1, cacheRead: 0.55, output: 4.4 }
const GPT_5: Published = { input: 1.25, cacheRead: 0.125, output: 10 }
const OPUS_4: Published = { input: 15, cacheWrite: 18.75, cacheRead: 1.5, output: 75 }
const SONNET_4: Published = { input: 3, cacheWrite: 3.75, cacheRead: 0.3, output: 15 }
const HAIKU_3_5: Published = { input: 0.8, cacheWrite: 1, cacheRead: 0.08, output: 4 }
const HAIKU_4_5: Published = { input: 1, cacheWrite: 1.25, cacheRead: 0.1, output: 5 }
const GEMINI_25_FLASH: Published = { input: 0.3, cacheRead: 0.03, output: 2.5 }
const GEMINI_20_FLASH: Published = { input: 0.1, cacheRead: 0.025, output: 0.4 }
const GEMINI_25_FLASH_LITE: Published = { input: 0.1, cacheRead: 0.01, output: 0.4 }
/** Gemini 2.5 Pro: prompts over 200k tokens pay the second tier on every token, output included. */
const GEMINI_25_PRO: Published = { input: 1.25, cacheRead: 0.125, output: 10 }
const GEMINI_25_PRO_LONG: Published = { input: 2.5, cacheRead: 0.25, output: 15 }

/** Published price of the counts: uncached input, cache reads, cache writes and output (reasoning included). */
function published (p: Published, c: { input: number; cacheRead: number; cacheWrite: number; output: number }): number {
  const usd = (c.input - c.cacheRead - c.cacheWrite) * p.input + c.cacheRead * (p.cacheRead ?? p.input) +
    c.cacheWrite * (p.cacheWrite ?? p.input) + c.output * p.output
  return usd / 1e6
}

const sse = (events: unknown[]): string => events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('')
const betaSse = (events: Array<Record<string, unknown>>): string => events.map((e) => `event: ${String(e.type)}\ndata: ${JSON.stringify(e)}\n\n`).join('')

interface Case {
  readonly provider: ProviderName
  readonly model: string
  readonly stream: boolean
  readonly body: string
  readonly price: Published
  /** The counts as the provider's usage block states them, in the price page's terms. */
  readonly counts: { input: number; cacheRead: number; cacheWrite: number; output: number }
}

function alpha (model: string, price: Published, stream: boolean, prompt: number, cached: number, completion: number, reasoning: number): Case {
  const usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 }, completion_tokens_details: { reasoning_tokens: reasoning, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 } }
  const body = stream
    ? sse([{ id: 'c', object: 'chat.completion.chunk', model, choices: [{ index: 0, delta: { role: 'assistant', content: 'Hi' } }] }, { id: 'c', object: 'chat.completion.chunk', model, choices: [], usage }]) + 'data: [DONE]\n\n'
    : JSON.stringify({ id: 'c', object: 'chat.completion', model, choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'stop' }], usage, service_tier: 'default' })
  return { provider: 'alpha', model, stream, body, price, counts: { input: prompt, cacheRead: cached, cacheWrite: 0, output: completion } }
}

function beta (model: string, price: Published, stream: boolean, input: number, read: number, write: number, output: number): Case {
  const usage = { input_tokens: input, cache_creation_input_tokens: write, cache_read_input_tokens: read, cache_creation: { ephemeral_5m_input_tokens: write, ephemeral_1h_input_tokens: 0 }, output_tokens: output, service_tier: 'standard' }
  const body = stream
    ? betaSse([
      { type: 'message_start', message: { id: 'msg', type: 'message', role: 'assistant', model, content: [], usage: { ...usage, output_tokens: 1 } } },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: output } },
      { type: 'message_stop' },
    ])
    : JSON.stringify({ id: 'msg', type: 'message', role: 'assistant', model, content: [{ type: 'text', text: 'Hi' }], stop_reason: 'end_turn', usage })
  return { provider: 'beta', model, stream, body, price, counts: { input: input + read + write, cacheRead: read, cacheWrite: write, output } }
}

function gamma (model: string, price: Published, stream: boolean, prompt: number, cached: number, candidates: number, thoughts: number): Case {
  const usageMetadata = { promptTokenCount: prompt, candidatesTokenCount: candidates, totalTokenCount: prompt + candidates + thoughts, ...(cached > 0 ? { cachedContentTokenCount: cached } : {}), ...(thoughts > 0 ? { thoughtsTokenCount: thoughts } : {}) }
  const chunk = (text: string, u: unknown): unknown => ({ candidates: [{ content: { parts: [{ text }], role: 'model' }, index: 0 }], usageMetadata: u, modelVersion: model })
  const body = stream
    ? sse([chunk('H', { promptTokenCount: prompt, totalTokenCount: prompt }), chunk('i', usageMetadata)])
    : JSON.stringify(chunk('Hi', usageMetadata))
  return { provider: 'gamma', model, stream, body, price, counts: { input: prompt, cacheRead: cached, cacheWrite: 0, output: candidates + thoughts } }
}

const CASES: readonly Case[] = [
  alpha('gpt-4o-2024-08-06', GPT_4O, false, 1_840, 1_024, 212, 0),
  alpha('gpt-4o', GPT_4O, true, 96, 0, 41, 0),
  alpha('gpt-4o-mini', GPT_4O_MINI, false, 2_310, 2_048, 77, 0),
  alpha('gpt-4o-mini-2024-07-18', GPT_4O_MINI, true, 18, 0, 9, 0),
  alpha('gpt-4.1', GPT_4_1, false, 5_120, 4_096, 640, 0),
  alpha('gpt-4', GPT_4, false, 250, 0, 120, 0),
  alpha('gpt-4-32k', GPT_4_32K, true, 30_000, 0, 1_000, 0),
  alpha('o1', O1, false, 1_500, 1_280, 3_900, 3_200),
  alpha('o1-pro', O1_PRO, false, 400, 0, 2_600, 2_048),
  alpha('o3-mini', O3_MINI, true, 700, 512, 1_800, 1_536),
  alpha('gpt-5', GPT_5, true, 3_000, 2_816, 4_200, 3_968),
  beta('claude-opus-4-20250514', OPUS_4, false, 12, 0, 4_735, 255),
  beta('claude-opus-4-20250514', OPUS_4, true, 8, 4_735, 0, 410),
  beta('claude-sonnet-4-20250514', SONNET_4, false, 1_200, 0, 0, 300),
  beta('claude-sonnet-4-20250514', SONNET_4, true, 20, 10_000, 2_000, 900),
  beta('claude-3-5-haiku-20241022', HAIKU_3_5, false, 3_000, 1_500, 500, 120),
  beta('claude-3-5-haiku-latest', HAIKU_3_5, true, 40, 0, 0, 30),
  beta('claude-haiku-4-5-20251001', HAIKU_4_5, false, 55, 2_000, 0, 64),
  beta('claude-haiku-4-5', HAIKU_4_5, true, 900, 0, 3_100, 700),
  gamma('gemini-2.5-flash', GEMINI_25_FLASH, false, 1_000, 0, 200, 800),
  gamma('gemini-2.5-flash', GEMINI_25_FLASH, true, 40_000, 32_768, 350, 1_200),
  gamma('models/gemini-2.5-flash', GEMINI_25_FLASH, false, 12, 0, 8, 0),
  gamma('gemini-2.0-flash', GEMINI_20_FLASH, false, 2_048, 1_024, 100, 0),
  gamma('gemini-2.0-flash-001', GEMINI_20_FLASH, true, 64, 0, 30, 0),
  gamma('gemini-2.5-flash-lite', GEMINI_25_FLASH_LITE, true, 500, 0, 60, 0),
  gamma('gemini-2.5-pro', GEMINI_25_PRO, false, 150_000, 100_000, 2_000, 6_000),
  gamma('gemini-2.5-pro', GEMINI_25_PRO, true, 199_999, 0, 1_000, 1_000),
  gamma('gemini-2.5-pro', GEMINI_25_PRO_LONG, false, 200_001, 0, 1_000, 3_000),
  gamma('gemini-2.5-pro', GEMINI_25_PRO_LONG, true, 320_000, 262_144, 4_000, 12_000),
  gamma('gemini-2.5-pro-preview-06-05', GEMINI_25_PRO, false, 3_000, 0, 500, 1_500),
]

t.test('30 usage blocks of three providers cost what their price pages say', async (t) => {
  t.equal(CASES.length, 30)
  const pricing = new Pricing()
  for (const c of CASES) {
    const what = `${c.provider} ${c.model}${c.stream ? ' stream' : ''}`
    const usage = readResponse(c.provider, c.stream, c.body).usage
    if (usage === null) { t.fail(`${what}: no usage read`); continue }
    t.same({ input: usage.input, cacheRead: usage.cached, cacheWrite: usage.cacheWrite, output: usage.output }, c.counts, `${what}: the counts read`)
    const got = pricing.cost(c.provider, c.model, usage, Date.UTC(2026, 10, 26))
    const want = published(c.price, c.counts)
    t.equal(got.status, 'priced', `${what}: priced`)
    t.ok(got.costUsd !== null && Math.abs(got.costUsd - want) <= want * 1e-9 + 1e-11, `${what}: ${got.costUsd} USD = ${want} USD`)
  }
})

t.test('names the old prefix table got wrong', async (t) => {
  const pricing = new Pricing()
  const usage = { input: 1_000_000, output: 1_000_000, cached: 0 }
  t.equal(pricing.cost('alpha', 'o1-pro', usage).costUsd, 750, 'o1-pro at its own price, not o1\'s')
  t.equal(pricing.find('alpha', 'o1-pro')?.model, 'o1-pro')
  for (const [p, m] of [['beta', 'claude-opus-4-20250514'], ['beta', 'claude-sonnet-4-20250514'], ['alpha', 'gpt-4'], ['alpha', 'gpt-4-32k']] as const) {
    t.equal(pricing.cost(p, m, usage).status, 'priced', `${m} is priced`)
  }
  t.same(pricing.cost('alpha', 'no-such-model', usage), { costUsd: null, status: 'unknown_model' })
  t.equal(pricing.cost('beta', 'gpt-4o', usage).status, 'unknown_model', 'a model is priced by its own provider only')
})

t.test('every model of the three catalogues: the same cost as the library\'s calcPrice', async (t) => {
  const pricing = new Pricing()
  const usages = [
    { input: 1_000, output: 200, cached: 0, cacheWrite: 0 },
    { input: 50_000, output: 3_000, cached: 20_000, cacheWrite: 10_000 },
    { input: 150_000, output: 9_000, cached: 0, cacheWrite: 64_000 },
    { input: 250_000, output: 12_000, cached: 100_000, cacheWrite: 50_000 },
    { input: 1_200_000, output: 40_000, cached: 600_000, cacheWrite: 0 },
  ]
  const when = [Date.UTC(2025, 0, 1), Date.UTC(2026, 10, 26), Date.UTC(2027, 5, 1)]
  let models = 0
  for (const [provider, id] of [['alpha', 'openai'], ['beta', 'anthropic'], ['gamma', 'google']] as const) {
    for (const m of findProvider({ providerId: id })!.models) {
      models++
      for (const u of usages) {
        for (const at of when) {
          const want = calcPrice({ input_tokens: u.input, cache_read_tokens: u.cached, cache_write_tokens: u.cacheWrite, output_tokens: u.output }, m.id, { providerId: id, timestamp: new Date(at) })
          const got = pricing.cost(provider, m.id, u, at)
          if (want === null) { t.equal(got.costUsd, null, `${m.id}: unpriced by both`); continue }
          const w = Math.round(want.total_price * 1e11) / 1e11
          if (got.costUsd === null || Math.abs(got.costUsd - w) > w * 1e-12 + 1e-11) t.fail(`${m.id} ${JSON.stringify(u)} at ${new Date(at).toISOString()}: ${got.costUsd} ≠ ${w}`)
        }
      }
    }
  }
  t.ok(models > 150, `${models} models compared`)
})
