// Micro-benchmark of PII at rest: the store worker's CPU per trace row built with masking against the
// same row built as sent (rows.ts buildRecord, which only masks for an account set to `mask`), on an
// alpha call with a ~2 KB prompt and a ~2 KB answer, whole and streamed, with PII and secrets in both
// (and once with none, the cost an opted-in account pays on ordinary text). Prints one JSON line.
// BENCH_PII_N sets the iterations per case (default 5000), BENCH_PII_KB the prompt and answer size (default 2).
import { performance } from 'node:perf_hooks'
import { Pricing } from '../src/pricing/index.js'
import type { RawTrace } from '../src/store/trace-types.js'
import { buildRecord } from '../src/store/worker/rows.js'

const n = Number(process.env.BENCH_PII_N ?? 5000)
const bytes = Number(process.env.BENCH_PII_KB ?? 2) * 1024

const PII = 'Write to jane.doe@example.com or call +1 415 555 0100; card 4111 1111 1111 1111, key sk-proj-Ab3De5Fg7Hj9Kl1Mn3Pq5Rs7Tu9Vw1Xy3Za5Bc7De9Fg1Hi3. '
const PROSE = 'The quarterly report covers revenue, churn and the hiring plan for the next two quarters, with "quoted" notes. '

/** A chat body of about `size` bytes: user and assistant turns, one sentence with PII in every fourth turn when asked. */
function prompt (size: number, withPii: boolean): string {
  const messages: Array<{ role: string, content: string }> = [{ role: 'system', content: 'You are a helpful assistant.' }]
  let i = 0
  while (JSON.stringify(messages).length < size) {
    messages.push({ role: i % 2 === 0 ? 'user' : 'assistant', content: (withPii && i % 4 === 0 ? PII : '') + PROSE.repeat(2) })
    i++
  }
  return JSON.stringify({ model: 'gpt-4o-mini', messages, temperature: 0.2 })
}

function answerText (size: number, withPii: boolean): string {
  let s = ''
  let i = 0
  while (s.length < size - 300) s += (withPii && i++ % 4 === 0 ? PII : '') + PROSE
  return s
}

function whole (text: string): string {
  return JSON.stringify({
    id: 'chatcmpl-1', object: 'chat.completion', model: 'gpt-4o-mini',
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 500, completion_tokens: 450, total_tokens: 950 },
  })
}

/** The answer as ~12-character deltas, as a model streams it, so values are split between events. */
function stream (text: string): string {
  let out = ''
  for (let i = 0; i < text.length; i += 12) {
    out += `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [{ index: 0, delta: { content: text.slice(i, i + 12) } }] })}\n\n`
  }
  return out + `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 500, completion_tokens: 450, total_tokens: 950 } })}\n\ndata: [DONE]\n\n`
}

function raw (request: string, response: string, streaming: boolean, maskPii: boolean): RawTrace {
  const req = Buffer.from(request)
  const res = Buffer.from(response)
  return {
    traceId: '0190a1b2-c3d4-7e5f-8a9b-000000000001', accountId: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b', keyId: '0190a1b2-c3d4-7e5f-8a9b-6c7d8e9f0a1b',
    time: Date.now(), provider: 'alpha', model: 'gpt-4o-mini', endpoint: '/api/alpha_service/chat_completion', streaming, confidential: false,
    status: 200, outcome: 'ok', errorCode: '', errorCause: '', attempts: '', bytes: Buffer.concat([req, res]), requestLength: req.length, requestBytes: req.length,
    headLength: res.length, responseBytes: res.length, chunkMarks: streaming ? [res.length, 5] : null, latencyMs: 100, ttfbMs: 5, providerMs: 95, overheadMs: 1,
    detection: '{"ran":true,"policy":"block","blocked":false,"would_block":false,"threshold":0.5,"allow_applied":false,"score":0.01,"categories":[],"ms":0.02}',
    issues: '', labels: null, span: null, stored: true, maskPii,
  }
}

const pricing = Pricing.load(null)

/**
 * CPU µs per row built (the process's user + system time, the bench being its one busy thread, so time spent waiting for a core on a busy
 * machine is not counted), median of 5 rounds; `wall` the same by the clock.
 */
function time (r: RawTrace): { cpu: number, wall: number } {
  const cpu: number[] = []
  const wall: number[] = []
  for (let i = 0; i < Math.min(1000, n); i++) buildRecord(r, pricing)
  for (let k = 0; k < 5; k++) {
    const c0 = process.cpuUsage()
    const t0 = performance.now()
    for (let i = 0; i < n / 5; i++) buildRecord(r, pricing)
    wall.push(((performance.now() - t0) * 1000) / (n / 5))
    const c = process.cpuUsage(c0)
    cpu.push((c.user + c.system) / (n / 5))
  }
  const median = (xs: number[]): number => xs.sort((a, b) => a - b)[2]!
  return { cpu: median(cpu), wall: median(wall) }
}

const round = (us: number): number => Math.round(us * 10) / 10
const cases: Record<string, { prompt_bytes: number, response_bytes: number, keep_cpu_us: number, mask_cpu_us: number, added_cpu_us: number, added_wall_us: number }> = {}
for (const [name, withPii, streaming] of [['whole_with_pii', true, false], ['streamed_with_pii', true, true], ['whole_no_pii', false, false], ['streamed_no_pii', false, true]] as const) {
  const request = prompt(bytes, withPii)
  const text = answerText(bytes, withPii)
  const response = streaming ? stream(text) : whole(text)
  const keep = time(raw(request, response, streaming, false))
  const mask = time(raw(request, response, streaming, true))
  cases[name] = {
    prompt_bytes: request.length,
    response_bytes: response.length,
    keep_cpu_us: round(keep.cpu),
    mask_cpu_us: round(mask.cpu),
    added_cpu_us: round(mask.cpu - keep.cpu),
    added_wall_us: round(mask.wall - keep.wall),
  }
}
process.stdout.write(JSON.stringify({ bench: 'pii-at-rest', iterations: n, cases }) + '\n')
