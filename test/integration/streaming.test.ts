// Streaming through the proxy: events reach the client as the provider sends them,
// a slow reader holds the provider back instead of growing the proxy's memory, a client that leaves
// aborts the upstream request, and a provider that breaks its answer is not turned into a clean end.
//
// One tracegate for the file, in front of the real mock provider. Gamma's base URL is a small node:http
// server of this file: it serves the 64 MB answer of the slow-reader test itself (the mock's answers are
// far smaller than the loopback buffers) and relays every other request to the mock unchanged.
import t from 'tap'
import { createHash } from 'node:crypto'
import { createServer, request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { chunkText, fullText } from '../../src/mock-provider/index.js'
import { startServer } from '../helpers/server.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { type SseEvent, SseSplitter } from '../helpers/sse.js'
import { type RawCall, rawPost } from '../helpers/raw-call.js'
import { until } from '../helpers/wait.js'

// The big answer: BIG_EVENTS Gemini SSE events of exactly EVENT_BYTES each, then a closing event.
const EVENT_BYTES = 64 * 1024
const BIG_EVENTS = 1024
const EVENT = ((): Buffer => {
  const head = 'data: {"candidates":[{"content":{"parts":[{"text":"'
  const tail = '"}],"role":"model"},"index":0}]}\r\n\r\n'
  return Buffer.from(head + 'x'.repeat(EVENT_BYTES - head.length - tail.length) + tail, 'latin1')
})()
const LAST_EVENT = Buffer.from('data: {"candidates":[{"content":{"parts":[{"text":"."}],"role":"model"},"finishReason":"STOP","index":0}],' +
  '"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":1025,"totalTokenCount":1030}}\r\n\r\n')
const BIG_TOTAL = BIG_EVENTS * EVENT_BYTES + LAST_EVENT.length
const BIG_SHA256 = ((): string => {
  const h = createHash('sha256')
  for (let i = 0; i < BIG_EVENTS; i++) h.update(EVENT)
  return h.update(LAST_EVENT).digest('hex')
})()

/** What the big upstream has handed to its socket (it waits for 'drain' whenever write() says so). */
const big = { written: 0, ended: false, closedEarly: false }

function drained (res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => { res.off('drain', done); res.off('close', done); resolve() }
    res.on('drain', done)
    res.on('close', done)
  })
}

async function sendBig (res: ServerResponse): Promise<void> {
  res.on('close', () => { if (!res.writableFinished) big.closedEarly = true })
  res.writeHead(200, { 'content-type': 'text/event-stream', vary: 'Origin, X-Origin, Referer' })
  for (let i = 0; i < BIG_EVENTS; i++) {
    if (res.destroyed) return
    const ok = res.write(EVENT)
    big.written += EVENT.length
    if (!ok) await drained(res)
  }
  res.end(LAST_EVENT)
  big.written += LAST_EVENT.length
  big.ended = true
}

const HOP_BY_HOP = ['connection', 'keep-alive', 'transfer-encoding', 'host']

function withoutHopByHop (headers: IncomingMessage['headers']): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = { ...headers }
  for (const name of HOP_BY_HOP) delete out[name]
  return out
}

let mockUrl = ''
/** Relays one request to the mock, streaming both ways, and passes on a cut in either direction. */
function relayToMock (req: IncomingMessage, res: ServerResponse): void {
  const up = httpRequest(mockUrl + (req.url ?? '/'), { method: req.method, headers: withoutHopByHop(req.headers), agent: false }, (ur) => {
    res.writeHead(ur.statusCode ?? 502, withoutHopByHop(ur.headers))
    ur.pipe(res)
    ur.on('aborted', () => { res.destroy() })
    ur.on('error', () => { res.destroy() })
  })
  up.on('error', () => { res.destroy() })
  res.on('close', () => { if (!res.writableFinished) up.destroy() })
  req.pipe(up)
}

const gammaUpstream = createServer({ noDelay: true }, (req, res) => {
  if ((req.url ?? '').startsWith('/v1beta/models/big-')) {
    req.resume()
    req.on('end', () => { void sendBig(res) })
    return
  }
  relayToMock(req, res)
})
await new Promise<void>((resolve) => { gammaUpstream.listen(0, '127.0.0.1', resolve) })
t.teardown(() => new Promise<void>((resolve) => {
  gammaUpstream.close(() => { resolve() })
  gammaUpstream.closeAllConnections()
}))

const s = await startServer(t, { TRACEGATE_GAMMA_BASE_URL: `http://127.0.0.1:${(gammaUpstream.address() as AddressInfo).port}` })
mockUrl = s.mock.url
const port = s.tg.proxyPort

function body (provider: keyof typeof ROUTES, model: string, stream: boolean): string {
  return JSON.stringify(bodyFor(provider, { api_key: s.key, model, stream, ...(provider === 'beta' ? { max_tokens: 1024 } : {}) }, 'Tell me a story'))
}

/** Sends a request and splits the body into SSE events as they arrive. */
function streamCall (provider: keyof typeof ROUTES, model: string, stream = true): { call: RawCall; sse: SseSplitter } {
  const call = rawPost(port, ROUTES[provider], body(provider, model, stream))
  const sse = new SseSplitter()
  call.onBody = (bytes, at) => { sse.push(bytes, at) }
  return { call, sse }
}

/** The text an event carries in each dialect, or null for events without content. */
const CONTENT: Record<keyof typeof ROUTES, (e: SseEvent) => string | null> = {
  alpha: (e) => {
    if (e.data === '[DONE]') return null
    const d = JSON.parse(e.data) as { choices: Array<{ delta?: { content?: string } }> }
    const c = d.choices[0]?.delta?.content
    return c === undefined || c === '' ? null : c
  },
  beta: (e) => {
    if (e.event !== 'content_block_delta') return null
    return (JSON.parse(e.data) as { delta: { text: string } }).delta.text
  },
  gamma: (e) => {
    const d = JSON.parse(e.data) as { candidates: Array<{ content: { parts: Array<{ text: string }> } }> }
    return d.candidates[0]?.content.parts[0]?.text ?? null
  },
}

const CHUNKS = 6
const GAP_MS = 300

t.test('events reach the client as the provider sends them', async (t) => {
  for (const provider of ['alpha', 'beta', 'gamma'] as const) {
    await t.test(provider, async (t) => {
      const completed = s.mock.stats.completed
      const started = performance.now()
      const { call, sse } = streamCall(provider, `mock-chunks-${CHUNKS}-gap-${GAP_MS}`)
      // When the first event arrived, and how many answers the provider had finished by then.
      const firsts: Array<{ at: number; completed: number }> = []
      sse.onEvent = (e) => { if (firsts.length === 0) firsts.push({ at: e.at, completed: s.mock.stats.completed - completed }) }
      const head = await call.head
      t.equal(head.status, 200)
      t.match(head.headers['content-type']?.[0], /^text\/event-stream/)
      t.match(head.headers['x-request-id']?.[0], /^[0-9a-f]{8}-[0-9a-f]{4}-7/)
      const end = await call.done
      t.ok(end.complete, 'the stream ends cleanly (terminating chunk)')
      t.equal(end.error, null)
      t.equal(sse.rest, '', 'nothing after the last event')
      const f = firsts[0]
      t.ok(f !== undefined, 'events arrived')
      if (f === undefined) return
      t.equal(f.completed, 0, 'the first event arrived while the provider was still answering')
      const total = (CHUNKS - 1) * GAP_MS
      t.ok(f.at - started < total / 2, `first event after ${Math.round(f.at - started)} ms, the answer takes ${total} ms`)

      const content = sse.events.map((e) => ({ text: CONTENT[provider](e), at: e.at })).filter((c) => c.text !== null)
      t.same(content.map((c) => c.text), Array.from({ length: CHUNKS }, (_, k) => chunkText(k, CHUNKS)), 'every content chunk, in order')
      t.equal(content.map((c) => c.text).join(''), fullText(CHUNKS))
      for (let k = 1; k < content.length; k++) {
        // The provider sends chunk k GAP_MS after chunk k-1; had the proxy held chunk k-1 back, the two
        // would arrive together. (Half the gap allows for event-loop lag on a loaded machine.)
        const gap = (content[k]?.at ?? 0) - (content[k - 1]?.at ?? 0)
        t.ok(gap >= GAP_MS / 2, `chunk ${k} arrived ${Math.round(gap)} ms after chunk ${k - 1}`)
      }
      const last = sse.events[sse.events.length - 1]
      if (provider === 'alpha') t.equal(last?.data, '[DONE]', 'alpha ends with data: [DONE]')
      if (provider === 'beta') t.equal(last?.event, 'message_stop', 'beta ends with message_stop')
      if (provider === 'gamma') t.match(last?.data, /"finishReason":"STOP"/, 'gamma ends with finishReason STOP')
      t.equal(s.mock.stats.completed - completed, 1, 'the provider finished its answer')
    })
  }
})

t.test('a slow reader holds the provider back; proxy memory stays bounded', async (t) => {
  const call = rawPost(port, ROUTES.gamma, body('gamma', 'big-answer', true))
  const hash = createHash('sha256')
  call.onBody = (bytes) => { hash.update(bytes) }
  const head = await call.head
  call.socket.pause()
  t.equal(head.status, 200)

  const base = process.memoryUsage()
  let maxRss = base.rss
  let maxArrayBuffers = base.arrayBuffers
  const sample = (): void => {
    const m = process.memoryUsage()
    maxRss = Math.max(maxRss, m.rss)
    maxArrayBuffers = Math.max(maxArrayBuffers, m.arrayBuffers)
  }
  const timer = setInterval(sample, 50)
  await new Promise((resolve) => setTimeout(resolve, 1000))
  const writtenAt1s = big.written
  await new Promise((resolve) => setTimeout(resolve, 1000))
  clearInterval(timer)
  sample()
  const writtenAt2s = big.written
  const MB = 1024 * 1024
  t.comment(`paused 2 s: provider wrote ${(writtenAt1s / MB).toFixed(1)} MB after 1 s, ${(writtenAt2s / MB).toFixed(1)} of ${(BIG_TOTAL / MB).toFixed(1)} MB; ` +
    `rss +${((maxRss - base.rss) / MB).toFixed(1)} MB, arrayBuffers +${((maxArrayBuffers - base.arrayBuffers) / MB).toFixed(1)} MB`)
  t.notOk(big.ended, 'the provider could not send the whole answer')
  t.ok(writtenAt2s < BIG_TOTAL / 2, 'the provider is held back well before the end')
  t.ok(writtenAt2s - writtenAt1s < 4 * MB, 'and stays held back while the reader waits')
  t.ok(maxRss - base.rss < 32 * MB, 'rss growth stays under 32 MB')
  t.ok(maxArrayBuffers - base.arrayBuffers < 32 * MB, 'arrayBuffers growth stays under 32 MB')

  call.socket.resume()
  const end = await call.done
  t.ok(end.complete, 'the stream ends cleanly once the reader reads')
  t.equal(end.bodyBytes, BIG_TOTAL, 'every byte arrives')
  t.equal(hash.digest('hex'), BIG_SHA256, 'intact')
  t.ok(big.ended, 'the provider finished')
  t.notOk(big.closedEarly, 'and its connection was not cut')
})

t.test('a client that leaves mid-stream aborts the upstream request', async (t) => {
  const aborted = s.mock.stats.aborted
  const completed = s.mock.stats.completed
  const { call, sse } = streamCall('alpha', 'mock-chunks-100-gap-50')
  const firstEvent = new Promise<void>((resolve) => { sse.onEvent = () => { resolve() } })
  t.equal((await call.head).status, 200)
  await firstEvent
  call.destroy()
  await s.mock.waitForAborted(aborted + 1)
  t.pass('the provider saw its request aborted')
  t.equal(s.mock.stats.completed, completed, 'the provider did not finish the answer')
  await until(() => s.tg.inflight === 0, { ms: 3000, what: 'the exchange to finish' })
  t.pass('the exchange finished')
})

t.test('a provider that breaks its answer is not turned into a clean end', async (t) => {
  for (const provider of ['alpha', 'beta'] as const) {
    await t.test(`${provider}, streaming`, async (t) => {
      const { call, sse } = streamCall(provider, 'mock-drop-chunks-20-gap-10')
      const end = await call.done
      t.equal(end.head?.status, 200, 'the answer had begun')
      t.ok(sse.events.length > 0, `the events sent before the cut arrived (${sse.events.length})`)
      t.notOk(end.complete, 'no terminating chunk: the client sees the cut')
      const texts = sse.events.map((e) => CONTENT[provider](e)).filter((c) => c !== null)
      t.ok(texts.length < 20, `only part of the answer arrived (${texts.length} of 20 chunks)`)
      if (provider === 'alpha') t.notOk(sse.events.some((e) => e.data === '[DONE]'), 'no [DONE]')
      if (provider === 'beta') t.notOk(sse.events.some((e) => e.event === 'message_stop'), 'no message_stop')
    })
  }

  await t.test('alpha, not streaming', async (t) => {
    const call = rawPost(port, ROUTES.alpha, body('alpha', 'mock-drop-chunks-2000', false))
    const parts: Buffer[] = []
    call.onBody = (bytes) => { parts.push(bytes) }
    const end = await call.done
    // Any of three is honest: the connection cut before a response, a 200 cut short, or a 5xx error.
    // Only a 200 that ends cleanly would pass the breakage off as an answer.
    if (end.head === null) {
      t.pass('the connection was cut before any response: the client sees an error')
    } else if (end.head.status === 200) {
      t.notOk(end.complete, 'a 200 answer is cut, not ended cleanly')
      t.throws(() => JSON.parse(Buffer.concat(parts).toString('utf8')), 'the client has only part of the body')
    } else {
      t.ok(end.head.status >= 500, `a provider error status (${end.head.status})`)
    }
    t.notOk(end.head?.status === 200 && end.complete, 'not a clean 200')
  })
})
