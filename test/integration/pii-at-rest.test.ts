// PII at rest through the real proxy, detection worker, store worker and embedded
// ClickHouse: an account set to mask stores prompt and response with placeholders instead of the e-mail,
// phone number, card number and API key they carry (all three dialects, streamed and not, values split
// across stream deltas), the stored texts stay valid JSON, the findings stay and point at the
// placeholders; an account on keep stores the text as before; the setting is read and changed through the
// CLI, the admin socket and the dashboard API (admins only), and applies from the next call. With span
// content capture on, a masked account's spans carry the masked text too. A tracegate key, as written,
// with JSON escapes or split between stream deltas, is in no stored row, export or span on either setting.
//
// The provider here is a scripted real HTTP server that answers each dialect's own shapes with a text that
// holds the same values, so the response side is checked too. The key cache keeps entries for ten
// minutes: a change seen at the next call is the update dropping the account's keys.
import t from 'tap'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { Agent } from 'undici'
import { accountDetectionView } from '../../src/admin/views.js'
import { DIALECTS, type ProviderName } from '../../src/providers/index.js'
import type { TraceRow } from '../../src/store/trace-types.js'
import { Tracegate } from '../../src/tracegate.js'
import { extractSegments } from '../../src/scan/extract.js'
import { bodyFor, PROVIDER_KEYS, ROUTES } from '../helpers/bodies.js'
import { cliEnv, oneJson, runTracegate, type CliRun } from '../helpers/cli.js'
import { UiClient } from '../helpers/dashboard.js'
import { send } from '../helpers/http.js'
import { sseData } from '../helpers/sse.js'
import { storedTrace } from '../helpers/store.js'
import { tempDir, testConfig } from '../helpers/server.js'
import { until } from '../helpers/wait.js'
import { DEFAULT_DETECTION } from '../../src/domain/detection-policy.js'

const EMAIL = 'jane.doe@example.com'
const PHONE = '+1 415 555 0100'
const CARD = '4111 1111 1111 1111'
const API_KEY = 'sk-proj-Ab3De5Fg7Hj9Kl1Mn3Pq5Rs7Tu9Vw1Xy3Za5Bc7De9Fg1Hi3'
const VALUES = [EMAIL, PHONE, CARD, API_KEY]
// A quote and a newline right before the e-mail: its JSON form has escapes a placeholder must not cut.
const PROMPT = `Please write to "me" at\n${EMAIL} or call ${PHONE}. My card is ${CARD} and my key is ${API_KEY}.`
const ANSWER = `Sure: I will write to ${EMAIL}, call ${PHONE}, charge ${CARD} and use ${API_KEY}.`
/** The answer in stream deltas, each value cut in two between deltas. */
const DELTAS = (() => {
  const cuts = VALUES.map((v) => ANSWER.indexOf(v) + Math.floor(v.length / 2)).sort((a, b) => a - b)
  const out: string[] = []
  let at = 0
  for (const c of cuts) { out.push(ANSWER.slice(at, c)); at = c }
  out.push(ANSWER.slice(at))
  return out
})()

// ---- the scripted provider ---------------------------------------------------------------------------

interface Received { path: string, body: string }
const received: Received[] = []

function answer (p: ProviderName, streaming: boolean, res: ServerResponse): void {
  const event = (data: unknown, name?: string): string => `${name === undefined ? '' : `event: ${name}\n`}data: ${JSON.stringify(data)}\n\n`
  if (!streaming) {
    const body = p === 'alpha'
      ? { id: 'chatcmpl-1', object: 'chat.completion', model: 'gpt-4o-mini', choices: [{ index: 0, message: { role: 'assistant', content: ANSWER }, finish_reason: 'stop' }], usage: { prompt_tokens: 30, completion_tokens: 20, total_tokens: 50 } }
      : p === 'beta'
        ? { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-5', content: [{ type: 'text', text: ANSWER }], stop_reason: 'end_turn', usage: { input_tokens: 30, output_tokens: 20 } }
        : { candidates: [{ content: { role: 'model', parts: [{ text: ANSWER }] }, finishReason: 'STOP', index: 0 }], usageMetadata: { promptTokenCount: 30, candidatesTokenCount: 20, totalTokenCount: 50 } }
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify(body))
    return
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  let out = ''
  if (p === 'alpha') {
    for (const d of DELTAS) out += event({ id: 'chatcmpl-1', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [{ index: 0, delta: { content: d } }] })
    out += event({ id: 'chatcmpl-1', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [], usage: { prompt_tokens: 30, completion_tokens: 20, total_tokens: 50 } })
    out += 'data: [DONE]\n\n'
  } else if (p === 'beta') {
    out += event({ type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', content: [], model: 'claude-sonnet-4-5', usage: { input_tokens: 30, output_tokens: 1 } } }, 'message_start')
    out += event({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start')
    for (const d of DELTAS) out += event({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: d } }, 'content_block_delta')
    out += event({ type: 'content_block_stop', index: 0 }, 'content_block_stop')
    out += event({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 20 } }, 'message_delta')
    out += event({ type: 'message_stop' }, 'message_stop')
  } else {
    DELTAS.forEach((d, i) => {
      const last = i === DELTAS.length - 1
      out += event({ candidates: [{ content: { role: 'model', parts: [{ text: d }] }, index: 0, ...(last ? { finishReason: 'STOP' } : {}) }], ...(last ? { usageMetadata: { promptTokenCount: 30, candidatesTokenCount: 20, totalTokenCount: 50 } } : {}) })
    })
  }
  writeEvents(res, out)
}

/** One write per event: the proxy sees the deltas in separate chunks, as from a real provider. */
function writeEvents (res: ServerResponse, out: string): void {
  const events = out.split(/(?<=\n\n)/)
  let k = 0
  const next = (): void => {
    if (k === events.length) { res.end(); return }
    res.write(events[k++])
    setImmediate(next)
  }
  next()
}

const upstream = createServer((req: IncomingMessage, res: ServerResponse) => {
  const parts: Buffer[] = []
  req.on('data', (c: Buffer) => parts.push(c))
  req.on('end', () => {
    const path = req.url ?? ''
    const body = Buffer.concat(parts).toString('utf8')
    received.push({ path, body })
    const p: ProviderName = path.startsWith('/v1/chat/completions') ? 'alpha' : path.startsWith('/v1/messages') ? 'beta' : 'gamma'
    const streaming = p === 'gamma' ? path.includes(':streamGenerateContent') : (JSON.parse(body) as { stream?: boolean }).stream === true
    // A prompt asking for echo(…) gets it back in an alpha answer: a response that holds a tracegate key,
    // streamed as three deltas that split it (the first cut inside `tgk_`).
    const echo = /echo\((tgk_[A-Za-z0-9_-]+)\)/.exec(body)?.[1]
    if (echo !== undefined && p === 'alpha' && streaming) {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      const chunk = (delta: unknown): string => `data: ${JSON.stringify({ id: 'chatcmpl-3', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [{ index: 0, delta }] })}\n\n`
      writeEvents(res, [`Your key is ${echo.slice(0, 2)}`, echo.slice(2, 20), `${echo.slice(20)}.`].map((content) => chunk({ content })).join('') + 'data: [DONE]\n\n')
      return
    }
    if (echo !== undefined && p === 'alpha' && !streaming) {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ id: 'chatcmpl-2', object: 'chat.completion', model: 'gpt-4o-mini', choices: [{ index: 0, message: { role: 'assistant', content: `Your key is ${echo}.` }, finish_reason: 'stop' }], usage: { prompt_tokens: 30, completion_tokens: 5, total_tokens: 35 } }))
      return
    }
    answer(p, streaming, res)
  })
})
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => { upstream.close(() => { resolve() }) }))
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`

// An OTLP/HTTP JSON receiver: the spans' attributes by request id.
const spanAttrs = new Map<string, Record<string, unknown>>()
const receiver = createServer((req, res) => {
  const parts: Buffer[] = []
  req.on('data', (c: Buffer) => parts.push(c))
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(parts).toString('utf8') || '{}')
    for (const rs of body.resourceSpans ?? []) {
      for (const ss of rs.scopeSpans ?? []) {
        for (const span of ss.spans ?? []) {
          const attrs: Record<string, unknown> = {}
          for (const a of span.attributes as Array<{ key: string, value: Record<string, unknown> }>) attrs[a.key] = Object.values(a.value)[0]
          spanAttrs.set(String(attrs['tracegate.request_id']), attrs)
        }
      }
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
  })
})
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => { receiver.close(() => { resolve() }) }))

// ---- tracegate ---------------------------------------------------------------------------------------

const dataDir = tempDir('tracegate-pii-at-rest-')
t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })
const tg = await Tracegate.start(testConfig(dataDir, null, {
  TRACEGATE_ALPHA_BASE_URL: upstreamUrl,
  TRACEGATE_BETA_BASE_URL: upstreamUrl,
  TRACEGATE_GAMMA_BASE_URL: upstreamUrl,
  TRACEGATE_KEY_CACHE_TTL_MS: '600000',
  TRACEGATE_DETECTION_DEADLINE_MS: '5000',
  OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_BSP_SCHEDULE_DELAY: '20',
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
}), { bootstrap: false, testSeams: true })
t.teardown(() => tg.close())
const masked = await tg.admin.createAccount({ name: 'masked', plan: 'pro' })
const maskedKey = (await tg.admin.createKey({ account: masked.id, scope: 'proxy' })).key
const kept = await tg.admin.createAccount({ name: 'kept', plan: 'pro' })
const keptKey = (await tg.admin.createKey({ account: kept.id, scope: 'proxy' })).key

const env = cliEnv(dataDir)
const cli = (args: string[]): Promise<CliRun> => runTracegate(args, env)


const setting = async (id: string): Promise<string | undefined> => (await tg.admin.listAccounts()).find((a) => a.id === id)?.detection.piiAtRest

interface Call { status: number, text: string, requestId: string, row: TraceRow, det: any, issues: any[], upstream: Received | undefined }

/** One call through the proxy's contract route asking PROMPT, and what was stored of it. */
async function call (p: ProviderName, apiKey: string, accountId: string, stream: boolean, extra: Record<string, unknown> = {}): Promise<Call> {
  const before = received.length
  const body = bodyFor(p, { api_key: apiKey, [`${p}_api_key`]: PROVIDER_KEYS[p], ...(stream ? { stream: true } : {}), ...extra }, PROMPT)
  const r = await send(`http://127.0.0.1:${tg.proxyPort}${ROUTES[p]}`, { body: JSON.stringify(body) })
  const row = await storedTrace(tg, accountId, r.requestId)
  return {
    status: r.status,
    text: r.text,
    requestId: r.requestId,
    row,
    det: row.detection === '' ? null : JSON.parse(row.detection),
    issues: row.issues === '' ? [] : JSON.parse(row.issues),
    upstream: received.length > before ? received[received.length - 1] : undefined,
  }
}

/** The answer's generated text as stored: the whole answer's, or every stream event's joined. */
function storedAnswer (p: ProviderName, stream: boolean, response: string): string {
  if (!stream) return DIALECTS[p].generatedText(JSON.parse(response))
  return sseData(response).map((ev) => DIALECTS[p].generatedText(ev)).join('')
}

/** Any 8-character piece of a value found in the text (a value masked only in part leaves one). */
function leaks (text: string): string[] {
  const found: string[] = []
  for (const v of VALUES) {
    for (let i = 0; i + 8 <= v.length; i++) if (text.includes(v.slice(i, i + 8))) { found.push(v.slice(i, i + 8)); break }
  }
  return found
}

t.test('migration 011: accounts read as keep unless set; the CLI sets, shows and refuses the setting', async (t) => {
  t.equal(masked.detection.piiAtRest, 'keep', 'a new account keeps the text')
  await tg.store.call('testQuery', {
    query: `INSERT INTO accounts (id, name, plan, server_side_keys, created_at, updated_at)
      SELECT {a:UUID}, 'written without the column', 'pro', false, now64(3), now64(3)`,
    params: { a: '0190b5a4-0000-7000-8000-00000000d011' },
  })
  t.same((await tg.store.call('getAccount', { id: '0190b5a4-0000-7000-8000-00000000d011' }))?.detection, DEFAULT_DETECTION, 'a row without the column reads as keep')

  const set = oneJson(t, await cli(['account', 'update', '--id', masked.id, '--pii-at-rest', 'mask', '--json']), 'set mask')
  t.same(set.detection, accountDetectionView({ ...DEFAULT_DETECTION, piiAtRest: 'mask' }), 'the CLI answers the account with its setting')
  t.equal(await setting(masked.id), 'mask', 'stored')
  t.equal(await setting(kept.id), 'keep', 'another account is untouched')
  const text = await cli(['account', 'list'])
  t.match(text.stdout, new RegExp(`${masked.id} .*PII at rest: mask`), 'account list shows it')

  for (const bad of ['erase', '', 'MASKED']) {
    const r = await cli(['account', 'update', '--id', masked.id, '--pii-at-rest', bad])
    t.equal(r.code, 1, `--pii-at-rest ${JSON.stringify(bad)} is refused`)
    t.match(r.stderr, /^tracegate: pii_at_rest /, 'naming the setting')
  }
  t.equal(await setting(masked.id), 'mask', 'nothing changed')
})

for (const p of ['alpha', 'beta', 'gamma'] as const) {
  for (const stream of [false, true]) {
    t.test(`${p}${stream ? ', streamed' : ''}: the masked account stores placeholders, valid JSON, and keeps its findings`, async (t) => {
      const c = await call(p, maskedKey, masked.id, stream)
      t.equal(c.status, 200)
      t.ok(c.upstream?.body.includes(JSON.stringify(EMAIL).slice(1, -1)), 'the provider received the prompt as sent')
      for (const v of VALUES) t.ok(c.text.includes(v) || stream, `the client received ${v} as sent`)
      if (stream) t.equal(storedAnswer(p, true, c.text), ANSWER, 'the client received the stream as sent')

      const prompt = JSON.parse(c.row.prompt)
      t.same(leaks(c.row.prompt), [], 'no piece of a value in the stored prompt')
      t.same(leaks(c.row.response), [], 'no piece of a value in the stored response')
      const segment = extractSegments(p, prompt)[0]?.text
      t.equal(segment, 'Please write to "me" at\n[EMAIL] or call [PHONE]. My card is [CARD] and my key is [SECRET].', 'the prompt\'s text, placeholders in place, the escapes intact')
      t.equal(storedAnswer(p, stream, c.row.response), 'Sure: I will write to [EMAIL], call [PHONE], charge [CARD] and use [SECRET].', 'the answer, each value masked even across deltas')
      if (stream) t.ok(sseData(c.row.response).length >= DELTAS.length, 'every event is still there, each valid JSON')

      t.match(c.det, { ran: true, policy: 'block', blocked: false, pii_at_rest: 'mask' }, 'the detection JSON says it was masked')
      const counts = { email: 1, phone: 1, payment_card: 1, openai_key: 1 }
      t.same(c.det.pii_masked, { prompt: counts, response: counts }, 'with the counts by kind')
      const kinds = c.issues.filter((f) => f.category === 'pii' || f.category === 'secret').map((f) => f.kind).sort()
      t.same(kinds, ['email', 'openai_key', 'payment_card', 'phone'], 'the findings stay')
      for (const f of c.issues) {
        if (f.category !== 'pii' && f.category !== 'secret') continue
        t.ok(!String(f.detail).includes(EMAIL) && !String(f.detail).includes(API_KEY), `${f.kind}: its detail is masked`)
        t.match(segment?.slice(f.span[0], f.span[1]), /^\[(EMAIL|PHONE|CARD|SECRET)\]$/, `${f.kind}: its span points at its placeholder`)
      }
      t.notOk(c.row.prompt.includes(maskedKey), 'the tracegate key is not stored')
      t.notOk(c.row.prompt.includes(PROVIDER_KEYS[p]), 'the provider key is not stored')

      const span = await until(() => spanAttrs.get(c.requestId), { ms: 10_000, what: `the span of ${c.requestId}` })
      const spanText = `${String(span['gen_ai.input.messages'])}\n${String(span['gen_ai.output.messages'])}`
      t.same(leaks(spanText), [], 'no piece of a value in the span\'s captured content')
      t.ok(spanText.includes('[EMAIL]') && spanText.includes('[SECRET]'), 'the span carries the placeholders')
    })
  }
}

t.test('an account on keep stores prompt and response as sent; neither stores a key', async (t) => {
  for (const p of ['alpha', 'beta', 'gamma'] as const) {
    for (const stream of [false, true]) {
      const c = await call(p, keptKey, kept.id, stream)
      t.equal(c.status, 200)
      t.equal(extractSegments(p, JSON.parse(c.row.prompt))[0]?.text, PROMPT, `${p}${stream ? ' streamed' : ''}: the prompt as sent`)
      t.equal(storedAnswer(p, stream, c.row.response), ANSWER, `${p}${stream ? ' streamed' : ''}: the answer as sent`)
      t.notOk('pii_at_rest' in (c.det ?? {}), 'no masking recorded')
      t.same(c.issues.filter((f) => f.category === 'pii' || f.category === 'secret').map((f) => f.kind).sort(), ['email', 'openai_key', 'payment_card', 'phone'], 'the same findings')
      t.notOk(c.row.prompt.includes(keptKey), 'the tracegate key is not stored')
      t.notOk(c.row.prompt.includes(PROVIDER_KEYS[p]), 'the provider key is not stored')
      const span = await until(() => spanAttrs.get(c.requestId), { ms: 10_000, what: `the span of ${c.requestId}` })
      t.ok(String(span['gen_ai.input.messages']).includes(EMAIL), 'the span carries the text as sent')
    }
  }
  // The native route: keys in headers, never in the stored body.
  const r = await send(`http://127.0.0.1:${tg.proxyPort}/v1/chat/completions`, {
    headers: { authorization: `Bearer ${keptKey}`, 'x-tracegate-provider-key': PROVIDER_KEYS.alpha },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: PROMPT }] }),
  })
  t.equal(r.status, 200)
  const row = await storedTrace(tg, kept.id, r.requestId)
  t.notOk(row.prompt.includes(keptKey) || row.prompt.includes(PROVIDER_KEYS.alpha) || row.response.includes(keptKey), 'native route: no key stored')
})

t.test('a tracegate key written in a prompt or an answer is never stored, on keep as on mask', async (t) => {
  const cut = keptKey.slice(0, 30)
  for (const [account, key] of [[kept, keptKey], [masked, maskedKey]] as const) {
    const prompt = `My proxy key is ${key}, the old one started ${cut} and tgk_short stays. echo(${key})`
    const r = await send(`http://127.0.0.1:${tg.proxyPort}${ROUTES.alpha}`, { body: JSON.stringify(bodyFor('alpha', { api_key: key, alpha_api_key: PROVIDER_KEYS.alpha }, prompt)) })
    t.equal(r.status, 200)
    t.ok(r.text.includes(`Your key is ${key}.`), 'the client received the answer as sent')
    t.ok(received.at(-1)?.body.includes(key), 'the provider received the prompt as sent')
    const row = await storedTrace(tg, account.id, r.requestId)
    const stored = `${row.prompt}\n${row.response}`
    t.notOk(stored.includes(key) || stored.includes(cut), `${account.name}: no key, whole or cut, in the stored prompt or response`)
    t.equal(extractSegments('alpha', JSON.parse(row.prompt))[0]?.text, 'My proxy key is [TRACEGATE_KEY], the old one started [TRACEGATE_KEY] and tgk_short stays. echo([TRACEGATE_KEY])', `${account.name}: the prompt with placeholders, valid JSON`)
    t.equal(DIALECTS.alpha.generatedText(JSON.parse(row.response)), 'Your key is [TRACEGATE_KEY].', `${account.name}: the answer with a placeholder, valid JSON`)
  }
  // Asked for on a native route, the key in the body is refused before anything is sent or stored.
  const before = received.length
  const r = await send(`http://127.0.0.1:${tg.proxyPort}/v1/chat/completions`, {
    headers: { authorization: `Bearer ${keptKey}`, 'x-tracegate-provider-key': PROVIDER_KEYS.alpha },
    body: JSON.stringify({ model: 'gpt-4o-mini', api_key: keptKey, alpha_api_key: PROVIDER_KEYS.alpha, messages: [{ role: 'user', content: 'Hi' }] }),
  })
  t.same([r.status, JSON.parse(r.text).error.code], [400, 'service_field_not_allowed'], 'native route: a key in the body is refused')
  t.notOk(r.text.includes(keptKey) || r.text.includes(PROVIDER_KEYS.alpha), 'and the answer does not echo it')
  t.equal(received.length, before, 'nothing reached the provider')
})

t.test('a key written with JSON escapes or split between stream deltas is in no stored row, read API export or span', async (t) => {
  const MARKER = 'ESCAPED-KEY-HERE'
  /** Any 8-character piece of the key's random part in a text. */
  const keyPieces = (text: string, key: string): string[] => {
    const found: string[] = []
    for (let i = 4; i + 8 <= key.length; i++) if (text.includes(key.slice(i, i + 8))) found.push(key.slice(i, i + 8))
    return found
  }
  for (const [account, key] of [[kept, keptKey], [masked, maskedKey]] as const) {
    const escaped = `\\u0074gk\\u005F${key.slice(4, 12)}\\u00${key.charCodeAt(12).toString(16)}${key.slice(13)}`
    const readKey = (await tg.admin.createKey({ account: account.id, scope: 'read' })).key
    const ids: string[] = []
    for (const stream of [false, true]) {
      const what = `${account.name}${stream ? ', streamed' : ''}`
      const body = JSON.stringify(bodyFor('alpha', { api_key: key, alpha_api_key: PROVIDER_KEYS.alpha, ...(stream ? { stream: true } : {}) }, `Mine is ${MARKER}, mail ${EMAIL}. echo(${key})`)).replace(MARKER, escaped)
      t.equal(JSON.parse(body).messages.at(-1).content, `Mine is ${key}, mail ${EMAIL}. echo(${key})`, 'the escapes decode to the key')
      const r = await send(`http://127.0.0.1:${tg.proxyPort}${ROUTES.alpha}`, { body })
      t.equal(r.status, 200)
      ids.push(r.requestId)
      t.equal(storedAnswer('alpha', stream, r.text), `Your key is ${key}.`, `${what}: the client received the answer as sent`)
      if (stream) t.notOk(r.text.includes('tgk_'), 'split between deltas, no event holds the key whole')
      const row = await storedTrace(tg, account.id, r.requestId)
      t.same(keyPieces(`${row.prompt}\n${row.response}`, key), [], `${what}: no piece of the key in the stored prompt or response`)
      const email = account === kept ? EMAIL : '[EMAIL]'
      const segments = extractSegments('alpha', JSON.parse(row.prompt))
      t.equal(segments.at(-1)?.text, `Mine is [TRACEGATE_KEY], mail ${email}. echo([TRACEGATE_KEY])`, `${what}: the prompt with placeholders, valid JSON`)
      // The findings' spans point into the stored text: at a key's placeholder, and past it at the e-mail.
      const found = (row.issues === '' ? [] : JSON.parse(row.issues)).filter((f: any) => f.kind === 'tracegate_key' || f.kind === 'email')
      t.same(found.map((f: any) => segments[f.segment]?.text.slice(f.span[0], f.span[1])).sort(), ['[TRACEGATE_KEY]', '[TRACEGATE_KEY]', email].sort(), `${what}: the findings' spans on the stored text`)
      t.equal(storedAnswer('alpha', stream, row.response), 'Your key is [TRACEGATE_KEY].', `${what}: the answer with its placeholder, every event valid JSON`)
      const span = await until(() => spanAttrs.get(r.requestId), { ms: 10_000, what: `the span of ${r.requestId}` })
      const spanText = `${String(span['gen_ai.input.messages'])}\n${String(span['gen_ai.output.messages'])}`
      t.same(keyPieces(spanText, key), [], `${what}: no piece of the key in the span's captured content`)
      t.ok(spanText.includes('Mine is [TRACEGATE_KEY]') && spanText.includes('Your key is [TRACEGATE_KEY].'), `${what}: the span carries the placeholders`)
    }
    for (const format of ['jsonl', 'csv']) {
      const r = await fetch(`http://127.0.0.1:${tg.dashboardPort}/api/v1/traces/export?range=all&format=${format}`, { headers: { authorization: `Bearer ${readKey}` } })
      const exported = await r.text()
      t.equal(r.status, 200)
      t.ok(ids.every((id) => exported.includes(id)), `${account.name}: the ${format} export holds the calls`)
      t.same(keyPieces(exported, key), [], `${account.name}: no piece of the key in the ${format} export`)
    }
  }
})

t.test('a confidential call of the masked account stores no text, as before', async (t) => {
  const c = await call('alpha', maskedKey, masked.id, false, { is_confidential: true })
  t.equal(c.status, 200)
  t.same([c.row.confidential, c.row.prompt, c.row.response, c.row.detection, c.row.issues], [true, '', '', '', ''])
})

t.test('a call refused before detection is stored masked too', async (t) => {
  // A bad parameter type: refused with 422 after the key is known, so its body is traced.
  const c = await call('alpha', maskedKey, masked.id, false, { stream: 'yes' })
  t.equal(c.status, 422)
  t.same(leaks(c.row.prompt), [], 'no piece of a value in the stored prompt')
  t.ok(c.row.prompt.includes('[EMAIL]'), 'placeholders instead')
  t.match(c.det, { pii_at_rest: 'mask', pii_masked: { prompt: { email: 1 } } })
  t.notOk('ran' in c.det, 'and no verdict is claimed')
})

t.test('masking does not depend on the detection policy: with detection off the text is masked all the same', async (t) => {
  await tg.admin.updateAccount({ id: masked.id, detection_policy: 'off' })
  t.teardown(async () => { await tg.admin.updateAccount({ id: masked.id, detection_policy: 'block' }) })
  const c = await call('gamma', maskedKey, masked.id, true)
  t.equal(c.status, 200)
  t.same([leaks(c.row.prompt), leaks(c.row.response)], [[], []], 'nothing of a value stored')
  t.same(c.issues, [], 'no findings: detection did not run')
  t.match(c.det, { ran: false, policy: 'off', pii_at_rest: 'mask', pii_masked: { prompt: { email: 1, phone: 1, payment_card: 1, openai_key: 1 } } })
})

t.test('a change applies from the next call, and the dashboard API reads it for anyone and changes it for admins only', async (t) => {
  const before = await call('beta', keptKey, kept.id, true)
  t.equal(storedAnswer('beta', true, before.row.response), ANSWER, 'kept as sent')
  oneJson(t, await cli(['account', 'update', '--id', kept.id, '--pii-at-rest', 'mask', '--json']), 'set mask')
  const after = await call('beta', keptKey, kept.id, true)
  t.same([leaks(after.row.prompt), leaks(after.row.response)], [[], []], 'the next call is masked')

  const dispatcher = new Agent({ keepAliveTimeout: 1_000 })
  t.teardown(() => dispatcher.close())
  const base = `http://127.0.0.1:${tg.dashboardPort}`
  await tg.admin.createUser({ account: kept.id, email: 'admin@pii.example', password: 'correct-horse-admin' })
  await tg.admin.createUser({ account: kept.id, email: 'member@pii.example', password: 'correct-horse-member', role: 'member' })
  const admin = new UiClient(base, dispatcher)
  const member = new UiClient(base, dispatcher)
  t.equal((await admin.signIn('admin@pii.example', 'correct-horse-admin')).status, 200)
  t.equal((await member.signIn('member@pii.example', 'correct-horse-member')).status, 200)

  const read = await member.get('/api/ui/account/pii-at-rest')
  t.same([read.status, read.json], [200, { pii_at_rest: 'mask', editable: false }], 'a member reads it')
  t.same((await admin.get('/api/ui/account/pii-at-rest')).json, { pii_at_rest: 'mask', editable: true }, 'an admin may change it')
  const denied = await member.post('/api/ui/account/pii-at-rest', { pii_at_rest: 'keep' })
  t.same([denied.status, denied.json?.error?.code], [403, 'not_allowed'], 'a member may not change it')
  const noCsrf = await admin.post('/api/ui/account/pii-at-rest', { pii_at_rest: 'keep' }, { csrf: false })
  t.same([noCsrf.status, noCsrf.json?.error?.code], [403, 'csrf_failed'], 'without the CSRF token')
  t.equal((await new UiClient(base, dispatcher).get('/api/ui/account/pii-at-rest')).status, 401, 'without a session')
  const bad: Array<[Record<string, unknown>, string]> = [
    [{ pii_at_rest: 'erase' }, 'pii_at_rest'],
    [{ pii_at_rest: null }, 'pii_at_rest'],
    [{ pii_at_rest: true }, 'pii_at_rest'],
    [{}, 'pii_at_rest'],
    [{ pii_at_rest: 'keep', policy: 'off' }, 'policy'],
  ]
  for (const [body, param] of bad) {
    const r = await admin.post('/api/ui/account/pii-at-rest', body)
    t.same([r.status, r.json?.error?.code, r.json?.error?.param], [400, 'invalid_parameter', param], `refused: ${JSON.stringify(body)}`)
  }
  t.equal(await setting(kept.id), 'mask', 'nothing changed')
  t.equal((await tg.admin.listAccounts()).find((a) => a.id === kept.id)?.detection.policy, 'block', 'the detection policy is untouched')

  const saved = await admin.post('/api/ui/account/pii-at-rest', { pii_at_rest: 'keep' })
  t.same([saved.status, saved.json], [200, { pii_at_rest: 'keep', editable: true }])
  const again = await call('gamma', keptKey, kept.id, true)
  t.equal(storedAnswer('gamma', true, again.row.response), ANSWER, 'the next call is stored as sent again')
  t.notOk('pii_at_rest' in (again.det ?? {}))
})
