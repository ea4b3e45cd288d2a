// Usage as each dialect reports it, prompt text for estimates, and the pricing table's arithmetic.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { Pricing } from '../../src/pricing/index.js'
import { sseData } from '../../src/providers/sse.js'
import { promptText, readResponse } from '../../src/store/worker/token-usage.js'
import { tempDir } from '../helpers/server.js'

const sse = (events: unknown[], crlf = false): string => events.map((e) => `data: ${JSON.stringify(e)}${crlf ? '\r\n\r\n' : '\n\n'}`).join('')

t.test('alpha', async (t) => {
  const body = JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'Hi there' } }], usage: { prompt_tokens: 120, completion_tokens: 7, prompt_tokens_details: { cached_tokens: 100 } } })
  const whole = readResponse('alpha', false, body)
  t.same(whole.usage, { input: 120, output: 7, cached: 100, cacheWrite: 0 })
  t.equal(whole.text(), 'Hi there')
  t.equal(whole.firstTokenEnd, null)
  const stream = sse([
    { choices: [{ delta: { role: 'assistant' } }] },
    { choices: [{ delta: { content: 'Hel' } }] },
    { choices: [{ delta: { content: 'lo' } }] },
    { choices: [], usage: { prompt_tokens: 9, completion_tokens: 2 } },
  ]) + 'data: [DONE]\n\n'
  const r = readResponse('alpha', true, stream)
  t.same(r.usage, { input: 9, output: 2, cached: 0, cacheWrite: 0 })
  t.equal(r.text(), 'Hello')
  t.ok(r.firstTokenEnd !== null && stream.slice(0, r.firstTokenEnd).includes('Hel') && !stream.slice(0, r.firstTokenEnd).includes('"lo"'))
  t.equal(readResponse('alpha', true, sse([{ choices: [{ delta: { content: 'x' } }] }])).usage, null, 'no include_usage: no usage')
  t.equal(promptText('alpha', JSON.stringify({ messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'Hello' }] }] })), 'Be brief.\nHello\n')
})

t.test('beta', async (t) => {
  const whole = JSON.stringify({ type: 'message', content: [{ type: 'text', text: 'Yes' }], usage: { input_tokens: 10, cache_read_input_tokens: 30, cache_creation_input_tokens: 5, output_tokens: 3 } })
  t.same(readResponse('beta', false, whole).usage, { input: 45, output: 3, cached: 30, cacheWrite: 5 })
  const stream = [
    'event: message_start\ndata: ' + JSON.stringify({ type: 'message_start', message: { usage: { input_tokens: 25, cache_read_input_tokens: 0, output_tokens: 1 } } }),
    'event: content_block_delta\ndata: ' + JSON.stringify({ type: 'content_block_delta', delta: { type: 'text_delta', text: 'Hi' } }),
    'event: message_delta\ndata: ' + JSON.stringify({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 12 } }),
    'event: message_stop\ndata: {"type":"message_stop"}',
  ].join('\n\n') + '\n\n'
  const r = readResponse('beta', true, stream)
  t.same(r.usage, { input: 25, output: 12, cached: 0, cacheWrite: 0 })
  t.equal(r.text(), 'Hi')
  t.equal(promptText('beta', JSON.stringify({ system: 'Sys', messages: [{ role: 'user', content: [{ type: 'tool_result', content: 'tool said' }, { type: 'text', text: 'q' }] }] })), 'Sys\ntool said\nq\n')
})

t.test('gamma', async (t) => {
  const chunk = (text: string, out: number): unknown => ({ candidates: [{ content: { parts: [{ text }], role: 'model' } }], usageMetadata: { promptTokenCount: 50, candidatesTokenCount: out, cachedContentTokenCount: 20, thoughtsTokenCount: 4 } })
  const stream = sse([chunk('A', 1), chunk('B', 2)], true)
  t.equal(sseData(stream).length, 2, 'CRLF framing')
  const r = readResponse('gamma', true, stream)
  t.same(r.usage, { input: 50, output: 6, cached: 20, cacheWrite: 0 }, 'thinking tokens count as output')
  t.equal(r.text(), 'AB')
  t.equal(promptText('gamma', JSON.stringify({ systemInstruction: { parts: [{ text: 'S' }] }, contents: [{ parts: [{ text: 'U' }, { functionResponse: { name: 'f', response: { ok: 1 } } }] }] })), 'S\nU\n{"ok":1}\n')
})

t.test('a whole answer: usage found at its end, or by parsing the whole answer', async (t) => {
  const usage = { prompt_tokens: 11, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 0 } }
  // The answer's text talks about "usage" in JSON: escaped inside the string, so not taken for the key.
  // It comes after the real key, so the last occurrence in the text is the quoted one.
  const tricky = JSON.stringify({ usage, choices: [{ message: { content: 'reply {"usage": {"prompt_tokens": 999}} end' } }] })
  t.same(readResponse('alpha', false, tricky).usage, { input: 11, output: 5, cached: 0, cacheWrite: 0 }, 'the top-level usage, not the quoted one')
  const onlyQuoted = JSON.stringify({ choices: [{ message: { content: 'see "usage": {"prompt_tokens": 999}' } }] })
  t.equal(readResponse('alpha', false, onlyQuoted).usage, null, 'no usage when only the text mentions it')
  t.equal(readResponse('alpha', false, onlyQuoted).text(), 'see "usage": {"prompt_tokens": 999}')
  const spaced = '{\n  "choices": [],\n  "usage" :  {"prompt_tokens": 3, "completion_tokens": 4, "note": "a } b"}\n}'
  t.same(readResponse('alpha', false, spaced).usage, { input: 3, output: 4, cached: 0, cacheWrite: 0 }, 'spacing and a brace inside a string')
  // The tail of a long answer kept past the capture limit: not JSON on its own, its usage still read.
  const long = JSON.stringify({ choices: [{ message: { content: 'y'.repeat(5000) } }], usage })
  t.same(readResponse('alpha', false, long.slice(4000)).usage, { input: 11, output: 5, cached: 0, cacheWrite: 0 }, 'usage from the tail of a cut answer')
  t.equal(readResponse('alpha', false, long.slice(0, 3000)).usage, null, 'no usage in a head without it')
  const gamma = JSON.stringify({ candidates: [{ content: { parts: [{ text: 'G' }] } }], usageMetadata: { promptTokenCount: 7, candidatesTokenCount: 2 }, modelVersion: 'g' })
  t.same(readResponse('gamma', false, gamma).usage, { input: 7, output: 2, cached: 0, cacheWrite: 0 })
  t.equal(readResponse('gamma', false, gamma).text(), 'G')
  // The same answers as bytes, as the store worker reads them (found by a byte search, decoded lazily).
  const b = (x: string): Buffer => Buffer.from(x)
  t.same(readResponse('alpha', false, b(tricky)).usage, { input: 11, output: 5, cached: 0, cacheWrite: 0 }, 'bytes: the top-level usage')
  t.equal(readResponse('alpha', false, b(onlyQuoted)).usage, null, 'bytes: only the text mentions it')
  t.equal(readResponse('alpha', false, b(onlyQuoted)).text(), 'see "usage": {"prompt_tokens": 999}', 'bytes: the text')
  t.same(readResponse('alpha', false, b(spaced)).usage, { input: 3, output: 4, cached: 0, cacheWrite: 0 }, 'bytes: spacing')
  t.same(readResponse('alpha', false, b(long.slice(4000))).usage, { input: 11, output: 5, cached: 0, cacheWrite: 0 }, 'bytes: the tail of a cut answer')
  const multibyte = JSON.stringify({ choices: [{ message: { content: 'é東😀 done' } }], usage })
  t.same(readResponse('alpha', false, b(multibyte)).usage, { input: 11, output: 5, cached: 0, cacheWrite: 0 }, 'bytes: multibyte text before the usage')
  t.equal(readResponse('alpha', false, b(multibyte)).text(), 'é東😀 done', 'bytes: the text decoded when asked for')
  t.same(readResponse('gamma', false, b(gamma)).usage, { input: 7, output: 2, cached: 0, cacheWrite: 0 }, 'bytes: gamma')
})

t.test('a cut stream keeps the events before the cut', async (t) => {
  const full = sse([{ choices: [{ delta: { content: 'a' } }] }, { choices: [{ delta: { content: 'b' } }] }])
  const r = readResponse('alpha', true, full.slice(0, full.length - 10))
  t.equal(r.text(), 'a')
})

t.test('an operator entry: arithmetic, matching and precedence', async (t) => {
  const p = new Pricing([
    { prices: [
      { provider: 'alpha', model: 'm', input_per_mtok: 1, output_per_mtok: 2, cached_input_per_mtok: 0.5, as_of: '2026-01-01' },
      { provider: 'alpha', model: 'm-mini', input_per_mtok: 0.1, output_per_mtok: 0.2, cached_input_per_mtok: null, as_of: '2026-01-01' },
      { provider: 'beta', model: 'b', input_per_mtok: 1, output_per_mtok: 1, cached_input_per_mtok: 0.1, cache_write_per_mtok: 1.25 },
      { provider: 'alpha', model: 'gpt-4o', input_per_mtok: 100, output_per_mtok: 100 },
    ] },
    { prices: [{ provider: 'alpha', model: 'm-mini', input_per_mtok: 3, output_per_mtok: 4, cached_input_per_mtok: null, as_of: '2026-02-01' }] },
  ])
  t.same(p.cost('alpha', 'm', { input: 1_000_000, output: 1_000_000, cached: 0 }), { costUsd: 3, status: 'priced' }, 'per million')
  t.same(p.cost('alpha', 'm', { input: 1_000_000, output: 0, cached: 400_000 }), { costUsd: 0.8, status: 'priced' }, 'cached input at its own price')
  t.same(p.cost('alpha', 'm', { input: 21, output: 24, cached: 0 }), { costUsd: 0.000069, status: 'priced' })
  t.equal(p.cost('alpha', 'm-mini', { input: 1_000_000, output: 0, cached: 0 }).costUsd, 3, 'a later table wins')
  t.equal(p.cost('alpha', 'm-mini', { input: 1_000_000, output: 0, cached: 1_000_000 }).costUsd, 3, 'no cached price: charged as input')
  t.equal(p.cost('beta', 'b', { input: 1_000_000, output: 0, cached: 200_000, cacheWrite: 400_000 }).costUsd, 0.4 + 0.02 + 0.5, 'cache writes at their own price')
  t.equal(p.find('alpha', 'm-mini-2025-01-01')?.model, 'm-mini', 'a dated version')
  t.same(p.find('alpha', 'M-20250101'), { model: 'm' }, 'case does not matter')
  t.equal(p.find('alpha', 'm-mini-x'), null, 'only a date or -latest extends an entry')
  t.equal(p.find('beta', 'm'), null, 'prices are per provider')
  t.equal(p.cost('alpha', 'gpt-4o-2024-08-06', { input: 1e6, output: 0, cached: 0 }).costUsd, 100, 'the operator wins over the library, dated versions too')
  t.equal(p.cost('alpha', 'gpt-4o-2024-05-13', { input: 1e6, output: 0, cached: 0 }).costUsd, 100, 'and every name the library takes as that model')
  t.same(p.cost('alpha', 'other', { input: 5, output: 5, cached: 0 }), { costUsd: null, status: 'unknown_model' })
  t.same(p.models('alpha').find((m) => m.id === 'm'), { id: 'm', asOf: '2026-01-01' }, 'listed with its date')
  t.ok(p.models('alpha').some((m) => m.id === 'o1-pro'), 'the library\'s models are listed beside it')
})

t.test('an operator file is checked', async (t) => {
  const dir = tempDir()
  const bad = join(dir, 'bad.json')
  writeFileSync(bad, JSON.stringify({ prices: [{ provider: 'delta', model: 'x', input_per_mtok: 1, output_per_mtok: 1 }] }))
  t.throws(() => Pricing.load(bad), { name: 'PricingError' })
  writeFileSync(bad, '{not json')
  t.throws(() => Pricing.load(bad), { name: 'PricingError' })
  const good = join(dir, 'good.json')
  writeFileSync(good, JSON.stringify({ prices: [{ provider: 'beta', model: 'claude-sonnet-4-5', input_per_mtok: 10, output_per_mtok: 20, as_of: '2026-11-01' }] }))
  t.equal(Pricing.load(good).cost('beta', 'claude-sonnet-4-5', { input: 1e6, output: 1e6, cached: 0 }).costUsd, 30)
})
