// The mock provider over real loopback HTTP: the three dialects streamed and not, their usage blocks,
// auth and error shapes, the model-name behaviours (error-NNN, drop, hang, ttft/chunks/gap), raw-body
// recording, backpressure and close().
import t, { type Test } from 'tap'
import { request as httpRequest } from 'node:http'
import {
  WORDS_PER_CHUNK,
  chunkText,
  fullText,
  parseBehaviour,
  startMockProvider,
  type MockProvider,
  type MockProviderOptions,
} from '../../src/mock-provider/index.js'
import { json, send, type RawResponse } from '../helpers/http.js'
import { sseEvents } from '../helpers/sse.js'
import { sleep } from '../helpers/wait.js'

interface Tap {
  teardown (fn: () => unknown): void
}

async function start (t: Tap, opts?: MockProviderOptions): Promise<MockProvider> {
  const mock = await startMockProvider(opts)
  t.teardown(() => mock.close())
  return mock
}

/** A fresh mock and one answer from it, which must be a 200 of `type`. */
async function answered (t: Test, path: string, headers: Record<string, string>, body: string, type: string): Promise<{ mock: MockProvider; a: RawResponse }> {
  const mock = await start(t)
  const a = await send(mock.url + path, { headers, body })
  t.equal(a.status, 200)
  t.equal(a.headers['content-type'], type)
  return { mock, a }
}

const ALPHA = '/v1/chat/completions'
const BETA = '/v1/messages'
const alphaAuth = { authorization: 'Bearer sk-test' }
const betaAuth = { 'x-api-key': 'sk-ant-test', 'anthropic-version': '2023-06-01' }
const gammaAuth = { 'x-goog-api-key': 'AIza-test' }

function alphaBody (model: string, extra = ''): string {
  return `{"model":${JSON.stringify(model)},"messages":[{"role":"user","content":"Hi"}]${extra}}`
}

function betaBody (model: string, extra = ''): string {
  return `{"model":${JSON.stringify(model)},"max_tokens":100,"messages":[{"role":"user","content":"Hi"}]${extra}}`
}

const gammaBody = '{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}'

function gammaPath (model: string, stream: boolean): string {
  const m = encodeURIComponent(model)
  return stream ? `/v1beta/models/${m}:streamGenerateContent?alt=sse` : `/v1beta/models/${m}:generateContent`
}

const tokensIn = (body: string): number => Math.ceil(Buffer.byteLength(body) / 4)

// The mock counts an answer as completed when its response closes, which can come a loop turn after the
// client has read the last byte; give it that turn before asserting on `completed`.
const settle = (): Promise<void> => sleep(20)

t.test('alpha: non-streamed chat.completion with usage and OpenAI headers', async (t) => {
  const body = alphaBody('gpt-4o-mini')
  const { mock, a } = await answered(t, ALPHA, alphaAuth, body, 'application/json')
  t.match(a.headers['x-request-id'], /^req_[0-9a-f]{32}$/)
  t.ok(a.headers['openai-processing-ms'] !== undefined)
  for (const h of ['x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens']) {
    t.match(a.headers[h], /^\d+$/, h)
  }
  t.equal(Number(a.headers['content-length']), a.body.length)
  const j = json(a)
  t.match(j.id, /^chatcmpl-[A-Za-z0-9]{29}$/)
  t.equal(j.object, 'chat.completion')
  t.equal(typeof j.created, 'number')
  t.equal(j.model, 'gpt-4o-mini')
  t.equal(j.choices[0].message.role, 'assistant')
  t.equal(j.choices[0].message.content, fullText(8))
  t.equal(j.choices[0].finish_reason, 'stop')
  t.match(j.system_fingerprint, /^fp_/)
  t.same(j.usage, {
    prompt_tokens: tokensIn(body),
    completion_tokens: 8 * WORDS_PER_CHUNK,
    total_tokens: tokensIn(body) + 8 * WORDS_PER_CHUNK,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  })
  t.equal(mock.stats.received, 1)
})

t.test('alpha: streamed chunks, usage only with stream_options.include_usage, then [DONE]', async (t) => {
  const body = alphaBody('gpt-4o', ',"stream":true,"stream_options":{"include_usage":true}')
  const { mock, a } = await answered(t, ALPHA, alphaAuth, body, 'text/event-stream')
  t.equal(a.headers['content-length'], undefined, 'streamed, not sized')
  t.notOk(a.text.includes('\r'), 'OpenAI frames with bare LF')
  const events = sseEvents(a.text)
  t.equal(events.at(-1)?.data, '[DONE]')
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data))
  t.equal(chunks.length, 1 + 8 + 1 + 1, 'role, 8 content deltas, finish, usage')
  const ids = new Set(chunks.map((c) => c.id))
  t.equal(ids.size, 1, 'one id for the whole stream')
  t.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === 'gpt-4o'))
  t.equal(chunks[0].choices[0].delta.role, 'assistant')
  const content = chunks.slice(1, 9).map((c) => c.choices[0].delta.content).join('')
  t.equal(content, fullText(8))
  t.equal(chunks[9].choices[0].finish_reason, 'stop')
  t.ok(chunks.slice(0, 10).every((c) => c.usage === null), 'usage: null on the chunks before the usage chunk')
  const last = chunks[10]
  t.same(last.choices, [])
  t.equal(last.usage.prompt_tokens, tokensIn(body))
  t.equal(last.usage.completion_tokens, 8 * WORDS_PER_CHUNK)
  t.equal(last.usage.total_tokens, tokensIn(body) + 8 * WORDS_PER_CHUNK)
  t.same(last.usage.prompt_tokens_details, { cached_tokens: 0, audio_tokens: 0 })

  const plain = await send(mock.url + ALPHA, { headers: alphaAuth, body: alphaBody('gpt-4o', ',"stream":true') })
  const plainChunks = sseEvents(plain.text).slice(0, -1).map((e) => JSON.parse(e.data))
  t.equal(plainChunks.length, 10, 'no usage chunk without include_usage')
  t.ok(plainChunks.every((c) => !('usage' in c)))
})

t.test('beta: non-streamed message with usage and Anthropic headers', async (t) => {
  const body = betaBody('claude-sonnet-4-5-chunks-3')
  const { mock, a } = await answered(t, BETA, betaAuth, body, 'application/json')
  t.match(a.headers['request-id'], /^req_/)
  t.match(a.headers['anthropic-ratelimit-requests-limit'], /^\d+$/)
  t.match(a.headers['anthropic-ratelimit-requests-remaining'], /^\d+$/)
  const j = json(a)
  t.match(j.id, /^msg_/)
  t.equal(j.type, 'message')
  t.equal(j.role, 'assistant')
  t.equal(j.model, 'claude-sonnet-4-5-chunks-3')
  t.same(j.content, [{ type: 'text', text: fullText(3) }])
  t.equal(j.stop_reason, 'end_turn')
  t.equal(j.stop_sequence, null)
  t.same(j.usage, { input_tokens: tokensIn(body), output_tokens: 3 * WORDS_PER_CHUNK, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 })
})

t.test('beta: streamed events in Anthropic order with usage at start and in message_delta', async (t) => {
  const body = betaBody('claude-haiku', ',"stream":true')
  const { mock, a } = await answered(t, BETA, betaAuth, body, 'text/event-stream')
  const events = sseEvents(a.text)
  t.same(events.map((e) => e.event), [
    'message_start', 'content_block_start', 'ping',
    ...Array.from({ length: 8 }, () => 'content_block_delta'),
    'content_block_stop', 'message_delta', 'message_stop',
  ])
  const data = events.map((e) => JSON.parse(e.data))
  t.ok(data.every((d, i) => d.type === events[i]?.event), 'data.type matches the event name')
  t.equal(data[0].message.model, 'claude-haiku')
  t.equal(data[0].message.usage.input_tokens, tokensIn(body))
  t.equal(data[0].message.usage.output_tokens, 1)
  const deltas = data.filter((d) => d.type === 'content_block_delta')
  t.ok(deltas.every((d) => d.delta.type === 'text_delta'))
  t.equal(deltas.map((d) => d.delta.text).join(''), fullText(8))
  const messageDelta = data.find((d) => d.type === 'message_delta')
  t.equal(messageDelta.delta.stop_reason, 'end_turn')
  t.equal(messageDelta.usage.output_tokens, 8 * WORDS_PER_CHUNK)
})

t.test('gamma: non-streamed answer, model from the URL-decoded path', async (t) => {
  const mock = await start(t)
  const a = await send(mock.url + gammaPath('gemini-2.5-flash chunks-2', false), { headers: gammaAuth, body: gammaBody })
  t.equal(a.status, 200)
  t.match(a.headers['content-type'], /^application\/json/)
  const j = json(a)
  t.same(j.candidates, [{ content: { parts: [{ text: fullText(2) }], role: 'model' }, finishReason: 'STOP', index: 0 }])
  t.same(j.usageMetadata, {
    promptTokenCount: tokensIn(gammaBody),
    candidatesTokenCount: 2 * WORDS_PER_CHUNK,
    totalTokenCount: tokensIn(gammaBody) + 2 * WORDS_PER_CHUNK,
  })
  t.equal(j.modelVersion, 'gemini-2.5-flash chunks-2')
  t.equal(typeof j.responseId, 'string')
})

t.test('gamma: streamed SSE with CRLF, usageMetadata on every chunk, cumulative', async (t) => {
  const mock = await start(t)
  const a = await send(mock.url + gammaPath('gemini-2.0-flash', true), { headers: gammaAuth, body: gammaBody })
  t.equal(a.status, 200)
  t.equal(a.headers['content-type'], 'text/event-stream')
  t.ok(a.text.endsWith('\r\n\r\n'))
  t.equal(a.text.split('\r\n\r\n').length - 1, 8, 'eight CRLF-terminated events')
  t.notOk(/[^\r]\n/.test(a.text), 'no bare LF')
  const chunks = sseEvents(a.text).map((e) => JSON.parse(e.data))
  t.equal(chunks.length, 8)
  chunks.forEach((c, k) => {
    t.equal(c.candidates[0].content.parts[0].text, chunkText(k, 8))
    t.equal(c.candidates[0].content.role, 'model')
    t.equal(c.usageMetadata.promptTokenCount, tokensIn(gammaBody))
    t.equal(c.usageMetadata.candidatesTokenCount, (k + 1) * WORDS_PER_CHUNK)
    t.equal(c.usageMetadata.totalTokenCount, tokensIn(gammaBody) + (k + 1) * WORDS_PER_CHUNK)
    t.equal(c.modelVersion, 'gemini-2.0-flash')
  })
  t.ok(chunks.slice(0, -1).every((c) => c.candidates[0].finishReason === undefined))
  t.equal(chunks.at(-1).candidates[0].finishReason, 'STOP')
  t.equal(new Set(chunks.map((c) => c.responseId)).size, 1)

  // Without alt=sse Gemini streams one JSON array.
  const arr = await send(`${mock.url}/v1beta/models/gemini-2.0-flash-chunks-3:streamGenerateContent`, { headers: gammaAuth, body: gammaBody })
  t.equal(arr.status, 200)
  const list = json(arr)
  t.equal(list.length, 3)
  t.equal(list.map((c: any) => c.candidates[0].content.parts[0].text).join(''), fullText(3))
})

t.test('auth: each provider\'s status and error shape', async (t) => {
  const mock = await start(t)
  const a = await send(mock.url + ALPHA, { body: alphaBody('gpt-4o') })
  t.equal(a.status, 401)
  const aj = json(a)
  t.equal(aj.error.type, 'invalid_request_error')
  t.equal(aj.error.code, 'invalid_api_key')
  t.equal(aj.error.param, null)
  t.equal(typeof aj.error.message, 'string')

  const b = await send(mock.url + BETA, { headers: { 'anthropic-version': '2023-06-01' }, body: betaBody('claude') })
  t.equal(b.status, 401)
  t.equal(json(b).type, 'error')
  t.equal(json(b).error.type, 'authentication_error')

  const v = await send(mock.url + BETA, { headers: { 'x-api-key': 'k' }, body: betaBody('claude') })
  t.equal(v.status, 400, 'anthropic-version is required')
  t.equal(json(v).error.type, 'invalid_request_error')

  const g = await send(mock.url + gammaPath('gemini-2.0-flash', false), { body: gammaBody })
  t.equal(g.status, 403)
  t.equal(json(g).error.code, 403)
  t.equal(json(g).error.status, 'PERMISSION_DENIED')
  const gq = await send(mock.url + gammaPath('gemini-2.0-flash', false).replace(/$/, '?key=AIza-test'), { body: gammaBody })
  t.equal(gq.status, 200, 'Gemini also takes ?key=')
  t.equal(mock.stats.received, 5, 'rejected requests are recorded too')
})

t.test('invalid JSON and unknown paths answer in the provider\'s shape', async (t) => {
  const mock = await start(t)
  const a = await send(mock.url + ALPHA, { headers: alphaAuth, body: '{"model":' })
  t.equal(a.status, 400)
  t.equal(json(a).error.type, 'invalid_request_error')
  const b = await send(mock.url + BETA, { headers: betaAuth, body: '[1]' })
  t.equal(b.status, 400)
  t.equal(json(b).error.type, 'invalid_request_error')
  const g = await send(mock.url + gammaPath('gemini', false), { headers: gammaAuth, body: 'nope' })
  t.equal(g.status, 400)
  t.equal(json(g).error.status, 'INVALID_ARGUMENT')
  const n = await send(mock.url + '/v1/nothing', { headers: alphaAuth, body: '{}' })
  t.equal(n.status, 404)
  t.equal(json(n).error.type, 'invalid_request_error')
  const m = await send(mock.url + ALPHA, { method: 'GET', headers: alphaAuth })
  t.equal(m.status, 404)
  const gn = await send(mock.url + '/v1beta/models/x:predict', { headers: gammaAuth, body: '{}' })
  t.equal(gn.status, 404)
  t.equal(json(gn).error.status, 'NOT_FOUND')
})

t.test('error-429: status, provider body and retry-after in every dialect', async (t) => {
  const mock = await start(t)
  const a = await send(mock.url + ALPHA, { headers: alphaAuth, body: alphaBody('mock-error-429', ',"stream":true') })
  t.equal(a.status, 429)
  t.equal(a.headers['retry-after'], '7')
  t.equal(a.headers['content-type'], 'application/json')
  t.equal(json(a).error.code, 'rate_limit_exceeded')
  t.match(a.headers['x-request-id'], /^req_/)

  const b = await send(mock.url + BETA, { headers: betaAuth, body: betaBody('mock-error-429') })
  t.equal(b.status, 429)
  t.equal(b.headers['retry-after'], '7')
  t.same(Object.keys(json(b)), ['type', 'error'])
  t.equal(json(b).error.type, 'rate_limit_error')

  const g = await send(mock.url + gammaPath('mock-error-429', true), { headers: gammaAuth, body: gammaBody })
  t.equal(g.status, 429)
  t.equal(g.headers['retry-after'], '7')
  t.same(json(g).error.status, 'RESOURCE_EXHAUSTED')

  const e500 = await send(mock.url + ALPHA, { headers: alphaAuth, body: alphaBody('x-error-500') })
  t.equal(e500.status, 500)
  t.equal(e500.headers['retry-after'], undefined)
  t.equal(json(e500).error.type, 'server_error')
  const e503 = await send(mock.url + BETA, { headers: betaAuth, body: betaBody('x-error-503') })
  t.equal(e503.status, 503)
  t.equal(e503.headers['retry-after'], '7')
  await settle()
  t.equal(mock.stats.completed, 5)
})

t.test('drop: the client sees a broken answer, streamed or not', async (t) => {
  const mock = await start(t)
  await t.rejects(send(mock.url + ALPHA, { headers: alphaAuth, body: alphaBody('mock-drop', ',"stream":true') }), 'alpha stream')
  await t.rejects(send(mock.url + ALPHA, { headers: alphaAuth, body: alphaBody('mock-drop') }), 'alpha json')
  await t.rejects(send(mock.url + BETA, { headers: betaAuth, body: betaBody('mock-drop', ',"stream":true') }), 'beta stream')
  await t.rejects(send(mock.url + gammaPath('mock-drop', true), { headers: gammaAuth, body: gammaBody }), 'gamma stream')

  // Headers and part of the stream arrive before the cut.
  const res = await fetch(mock.url + ALPHA, { method: 'POST', headers: alphaAuth, body: alphaBody('mock-drop-chunks-10', ',"stream":true') })
  t.equal(res.status, 200)
  const reader = res.body!.getReader()
  let text = ''
  const broken = await (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return false
        text += Buffer.from(value).toString('utf8')
      }
    } catch {
      return true
    }
  })()
  t.ok(broken, 'the body stream errors')
  t.ok(text.includes('"role":"assistant"'))
  t.notOk(text.includes('[DONE]'))
  const content = sseEvents(text).filter((e) => e.data.includes('"content":"') && !e.data.includes('"role"'))
  t.equal(content.length, 5, 'half the chunks')

  // A sized answer announces the full length and sends half of it.
  const sized = await fetch(mock.url + BETA, { method: 'POST', headers: betaAuth, body: betaBody('mock-drop') })
  t.equal(sized.status, 200)
  t.ok(Number(sized.headers.get('content-length')) > 0)
  await t.rejects(sized.text())
  t.equal(mock.stats.aborted, 0, 'a drop is the mock\'s doing, not a client abort')
})

t.test('hang: the client times out and the abort is counted', async (t) => {
  const mock = await start(t)
  const started = Date.now()
  await t.rejects(send(mock.url + ALPHA, { headers: alphaAuth, body: alphaBody('mock-hang'), timeoutMs: 150 }))
  t.ok(Date.now() - started >= 140)
  await mock.waitForAborted(1)
  t.equal(mock.stats.aborted, 1)
  t.equal(mock.stats.received, 1, 'the body was read')
  t.equal(mock.requests[0]?.body.toString(), alphaBody('mock-hang'))
})

t.test('hang: close() ends hanging and kept-alive connections', async (t) => {
  const mock = await startMockProvider()
  const pending = [
    send(mock.url + ALPHA, { headers: alphaAuth, body: alphaBody('mock-hang') }),
    send(mock.url + BETA, { headers: betaAuth, body: betaBody('slow-ttft-60000') }),
    send(mock.url + gammaPath('mock-hang', true), { headers: gammaAuth, body: gammaBody }),
  ]
  const settled = Promise.allSettled(pending)
  // A kept-alive idle socket from fetch's pool must not hold close() open either.
  await (await fetch(mock.url + ALPHA, { method: 'POST', headers: alphaAuth, body: alphaBody('gpt') })).text()
  await mock.waitForRequests(4)
  const started = Date.now()
  await mock.close()
  t.ok(Date.now() - started < 1000, 'close() does not wait for the hanging answers')
  const results = await settled
  t.ok(results.every((r) => r.status === 'rejected'), 'the clients see their connections closed')
  t.equal(mock.stats.aborted, 0, 'closing is not a client abort')
  await mock.close()
  t.pass('close() twice is fine')
})

t.test('requests holds the exact raw bytes, headers and order', async (t) => {
  const mock = await start(t)
  // Spacing, escapes, key order and an integer beyond 2^53 must survive byte for byte.
  const body = Buffer.from('{ "model" : "gpt-4o",\n"seed":12345678901234567890123,"messages":[{"role":"user","content":"caf\\u00e9 \u00e9 \ud83d\ude00"}] }')
  await send(mock.url + ALPHA, { headers: { ...alphaAuth, 'x-trace-me': 'yes' }, body })
  await send(mock.url + BETA + '?beta=true', { headers: betaAuth, body: betaBody('claude') })
  await mock.waitForRequests(2)
  t.equal(mock.requests.length, 2)
  const first = mock.requests[0]!
  t.ok(first.body.equals(body), 'exact bytes')
  t.equal(first.method, 'POST')
  t.equal(first.url, ALPHA)
  t.equal(first.headers['x-trace-me'], 'yes')
  t.ok(first.rawHeaders.includes('x-trace-me'))
  t.equal(typeof first.receivedAt, 'number')
  t.equal(mock.requests[1]?.url, BETA + '?beta=true', 'newest last, query kept')

  mock.reset()
  t.equal(mock.requests.length, 0)
  t.same(mock.stats, { received: 0, completed: 0, aborted: 0 })
})

t.test('recordLimit keeps the newest requests; 0 keeps none but still counts', async (t) => {
  const two = await start(t, { recordLimit: 2 })
  for (const m of ['a', 'b', 'c']) await send(two.url + ALPHA, { headers: alphaAuth, body: alphaBody(m) })
  t.same(two.requests.map((r) => JSON.parse(r.body.toString()).model), ['b', 'c'])

  const none = await start(t, { recordLimit: 0 })
  await send(none.url + ALPHA, { headers: alphaAuth, body: alphaBody('a') })
  t.equal(none.requests.length, 0)
  t.equal(none.stats.received, 1)
  await settle()
  t.equal(none.stats.completed, 1)
})

t.test('ttft, chunks and gap: options and per-request overrides from the model name', async (t) => {
  const mock = await start(t, { chunks: 2, ttftMs: 0 })
  const plain = await send(mock.url + ALPHA, { headers: alphaAuth, body: alphaBody('gpt') })
  t.equal(json(plain).choices[0].message.content, fullText(2), 'chunks from the options')

  let started = Date.now()
  const slow = await send(mock.url + BETA, { headers: betaAuth, body: betaBody('m-chunks-4-gap-40', ',"stream":true') })
  t.ok(Date.now() - started >= 110, 'three gaps of 40 ms')
  t.equal(sseEvents(slow.text).filter((e) => e.event === 'content_block_delta').length, 4)

  started = Date.now()
  const res = await fetch(mock.url + ALPHA, { method: 'POST', headers: alphaAuth, body: alphaBody('m-ttft-120', ',"stream":true') })
  t.ok(Date.now() - started >= 110, 'headers wait for ttft')
  await res.text()

  const withTtft = await start(t, { ttftMs: 100 })
  started = Date.now()
  await send(withTtft.url + gammaPath('gemini', false), { headers: gammaAuth, body: gammaBody })
  t.ok(Date.now() - started >= 90, 'ttft from the options')
})

t.test('a client leaving mid-stream stops the answer and counts as aborted', async (t) => {
  const mock = await start(t)
  const controller = new AbortController()
  const res = await fetch(mock.url + ALPHA, {
    method: 'POST', headers: alphaAuth, body: alphaBody('m-chunks-100-gap-20', ',"stream":true'), signal: controller.signal,
  })
  const reader = res.body!.getReader()
  await reader.read()
  controller.abort()
  await mock.waitForAborted(1)
  t.equal(mock.stats.aborted, 1)
  t.equal(mock.stats.completed, 0)
})

t.test('streaming honours backpressure and still delivers everything', async (t) => {
  const mock = await start(t)
  const n = 20_000
  const answer = await new Promise<string>((resolve, reject) => {
    const req = httpRequest(mock.url + ALPHA, { method: 'POST', headers: alphaAuth, agent: false }, (res) => {
      // Read nothing for a while so the socket fills and the mock has to wait for 'drain'.
      res.pause()
      setTimeout(() => {
        const parts: Buffer[] = []
        res.on('data', (p: Buffer) => { parts.push(p) })
        res.on('end', () => { resolve(Buffer.concat(parts).toString('utf8')) })
        res.resume()
      }, 200)
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(alphaBody(`m-chunks-${n}`, ',"stream":true'))
  })
  const events = sseEvents(answer)
  t.equal(events.length, n + 3, 'role, every chunk, finish, [DONE]')
  t.equal(events.at(-1)?.data, '[DONE]')
  await settle()
  t.equal(mock.stats.completed, 1)
})

t.test('keep-alive: many requests over reused connections', async (t) => {
  const mock = await start(t, { recordLimit: 0 })
  const all = await Promise.all(Array.from({ length: 200 }, async (_, i) => {
    const r = await fetch(mock.url + ALPHA, { method: 'POST', headers: alphaAuth, body: alphaBody(`gpt-${i}`, i % 2 === 0 ? ',"stream":true' : '') })
    await r.text()
    return r.status
  }))
  t.ok(all.every((s) => s === 200))
  t.equal(mock.stats.received, 200)
})

t.test('options are validated and model names parsed into behaviours', async (t) => {
  await t.rejects(startMockProvider({ chunks: 0 }), RangeError)
  await t.rejects(startMockProvider({ gapMs: -1 }), RangeError)
  await t.rejects(startMockProvider({ ttftMs: 1.5 }), RangeError)

  const defaults = { host: '127.0.0.1', port: 0, ttftMs: 5, chunks: 8, gapMs: 1, recordLimit: 10 }
  t.match(parseBehaviour('gpt-4o', defaults), { mode: 'normal', status: 200, ttftMs: 5, chunks: 8, gapMs: 1 })
  t.match(parseBehaviour('mock-error-429', defaults), { mode: 'error', status: 429 })
  t.match(parseBehaviour('mock-error-200', defaults), { mode: 'normal', status: 200 }, 'only 4xx and 5xx')
  t.match(parseBehaviour('mock-hang-drop', defaults), { mode: 'hang' })
  t.match(parseBehaviour('mock-drop', defaults), { mode: 'drop' })
  t.match(parseBehaviour('mock-chunks-50-gap-20-ttft-300', defaults), { mode: 'normal', chunks: 50, gapMs: 20, ttftMs: 300 })
  t.match(parseBehaviour('mock-chunks-0', defaults), { chunks: 1 }, 'at least one chunk')
})
