// The native routes (docs/endpoints.md) as the tests call them: each provider's own path, where its
// SDK sends the key, the auth header the provider receives, a minimal body; and the checks every native
// test makes: the provider's own error shape carrying tracegate's code and request id, and what the
// provider may and may not receive.
import { readFileSync } from 'node:fs'
import { connect } from 'node:net'
import type { Test } from 'tap'
import type { RecordedRequest } from '../../src/mock-provider/index.js'
import { ERRORS, type ErrorCode } from '../../src/errors.js'
import { findProvider } from '@pydantic/genai-prices'
import type { Price } from './traces.js'
import { DIALECTS, PROVIDERS } from '../../src/providers/index.js'
import { DEFAULT_MODELS, type Provider } from './bodies.js'
import { json, type RawResponse, UUID_V7 } from './http.js'

/** Every registered provider: the built-in ones, and a test provider when the test registered one. */
export const PROVIDER_NAMES: readonly Provider[] = PROVIDERS
const BUILT_IN: readonly string[] = ['alpha', 'beta', 'gamma']
/** The registered providers this file knows only from their modules (test providers). */
export const OTHER_PROVIDERS: readonly Provider[] = PROVIDERS.filter((p) => !BUILT_IN.includes(p))

export interface NativeRoute {
  /** The POST path of a call that does not stream. */
  readonly path: string
  /** The POST path of a streaming call (gamma's alt=sse; alpha and beta stream by a body member). */
  readonly streamPath: string
  /** The path the provider must receive for each (the query less `key`). */
  readonly upstreamPath: string
  readonly upstreamStreamPath: string
  /** The header the provider key reaches the provider in, and its value for a key. */
  readonly authHeader: string
  authValue (key: string): string
  /** The header the SDK sends its API key in (beta's SDK adds anthropic-version). */
  sdkKey (key: string): Record<string, string>
  /** A minimal body asking `text`. */
  body (text: string, stream?: boolean): string
  readonly model: string
}

const GEMINI = '/v1beta/models/gemini-2.5-flash'

// The built-in providers' routes as their SDKs and APIs document them.
const DOCUMENTED: Readonly<Record<string, NativeRoute>> = {
  alpha: {
    path: '/v1/chat/completions',
    streamPath: '/v1/chat/completions',
    upstreamPath: '/v1/chat/completions',
    upstreamStreamPath: '/v1/chat/completions',
    authHeader: 'authorization',
    authValue: (key) => `Bearer ${key}`,
    sdkKey: (key) => ({ authorization: `Bearer ${key}` }),
    body: (text, stream = false) => JSON.stringify({
      model: 'gpt-4o-mini', messages: [{ role: 'user', content: text }], ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    }),
    model: 'gpt-4o-mini',
  },
  beta: {
    path: '/v1/messages',
    streamPath: '/v1/messages',
    upstreamPath: '/v1/messages',
    upstreamStreamPath: '/v1/messages',
    authHeader: 'x-api-key',
    authValue: (key) => key,
    sdkKey: (key) => ({ 'x-api-key': key, 'anthropic-version': '2023-06-01' }),
    body: (text, stream = false) => JSON.stringify({
      model: 'claude-sonnet-4-6', max_tokens: 64, messages: [{ role: 'user', content: text }], ...(stream ? { stream: true } : {}),
    }),
    model: 'claude-sonnet-4-6',
  },
  gamma: {
    path: `${GEMINI}:generateContent`,
    streamPath: `${GEMINI}:streamGenerateContent?alt=sse`,
    upstreamPath: `${GEMINI}:generateContent`,
    upstreamStreamPath: `${GEMINI}:streamGenerateContent?alt=sse`,
    authHeader: 'x-goog-api-key',
    authValue: (key) => key,
    sdkKey: (key) => ({ 'x-goog-api-key': key }),
    body: (text) => JSON.stringify({ contents: [{ role: 'user', parts: [{ text }] }] }),
    model: 'gemini-2.5-flash',
  },
}

/** A test provider's native route, as its module describes it (a route with no model in its path). */
function fromModule (p: Provider): NativeRoute {
  const d = DIALECTS[p]
  const model = DEFAULT_MODELS[p]
  const auth = (key: string): [string, string] => Object.entries(d.authHeaders(key))[0]!
  const sdkHeader = d.native.keyHeaders[0]!
  return {
    path: d.native.route,
    streamPath: d.native.route,
    upstreamPath: d.target({ model, stream: false }).path,
    upstreamStreamPath: d.target({ model, stream: true }).path,
    authHeader: auth('')[0],
    authValue: (key) => auth(key)[1],
    sdkKey: (key) => ({ [sdkHeader]: sdkHeader === 'authorization' ? `Bearer ${key}` : key }),
    body: (text, stream = false) => JSON.stringify({ model, ...d.sampleBody(text), ...(stream ? { stream: true } : {}) }),
    model,
  }
}

export const NATIVE: Readonly<Record<Provider, NativeRoute>> = Object.fromEntries(PROVIDERS.map((p) => [p, DOCUMENTED[p] ?? fromModule(p)])) as Record<Provider, NativeRoute>

/** Every provider's auth header. */
const AUTH_HEADERS = [...new Set(PROVIDERS.map((p) => NATIVE[p].authHeader))]

/** The name/value pairs of a recorded request's raw headers, names in lower case. */
function headerPairs (req: RecordedRequest): Array<[string, string]> {
  const out: Array<[string, string]> = []
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) out.push([req.rawHeaders[i]!.toLowerCase(), req.rawHeaders[i + 1]!])
  return out
}

/**
 * The provider got exactly its own auth header, once, with `providerKey`; no other provider's auth
 * header, no x-tracegate-* header, and no tracegate key in a header, the URL or the body.
 */
export function checkUpstreamAuth (t: Test, provider: Provider, req: RecordedRequest, providerKey: string): void {
  const pairs = headerPairs(req)
  const own = NATIVE[provider].authHeader
  t.same(pairs.filter(([n]) => n === own).map(([, v]) => v), [NATIVE[provider].authValue(providerKey)], `one ${own} header, with the provider key`)
  for (const other of AUTH_HEADERS) if (other !== own) t.equal(req.headers[other], undefined, `no ${other} header`)
  t.same(pairs.filter(([n]) => n.startsWith('x-tracegate-')).map(([n]) => n), [], 'no x-tracegate-* header')
  t.notOk(pairs.some(([, v]) => v.includes('tgk_')), 'no tracegate key in a header')
  t.notOk(req.url.includes('tgk_'), 'no tracegate key in the URL')
  t.notOk(req.body.includes('tgk_'), 'no tracegate key in the body')
}

// Anthropic's error types and Google's rpc status names, by the status the client receives.
const BETA_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error', 404: 'not_found_error',
}
const GAMMA_STATUSES: Readonly<Record<number, string>> = {
  400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND',
}

/** The status a native route answers tracegate's `status` with: Anthropic and Google have no 422; a test provider as its module says. */
export function nativeStatus (provider: Provider, status: number): number {
  if (!BUILT_IN.includes(provider)) return moduleError(provider, status, 'internal_error', null, '', []).status
  return provider !== 'alpha' && status === 422 ? 400 : status
}

/** Stands for any string in an expected error body: the message, and the members a code adds. */
const ANY = '\u0000any\u0000'

/** A test provider's error as its module writes it, with ANY for the message and for each extra member. */
function moduleError (provider: Provider, status: number, code: ErrorCode, param: string | null, requestId: string, extra: readonly string[]) {
  const e = DIALECTS[provider].native.clientError({
    status, type: ERRORS[code].type, code, message: ANY, param, requestId, extra: Object.fromEntries(extra.map((x) => [x, ANY])),
  })
  return { status: e.status, body: JSON.parse(e.body) as unknown }
}

/** `actual` has exactly the members of `expected`, in order, with its values (any value where ANY stands). */
function sameShape (t: Test, actual: unknown, expected: unknown, at = 'body'): void {
  if (expected === ANY) { t.not(actual, undefined, `${at} is there`); return }
  if (expected === null || typeof expected !== 'object') { t.equal(actual, expected, at); return }
  if (actual === null || typeof actual !== 'object') { t.fail(`${at} is not an object`); return }
  t.same(Object.keys(actual), Object.keys(expected), `${at}: its members`)
  for (const [k, v] of Object.entries(expected)) sameShape(t, (actual as Record<string, unknown>)[k], v, `${at}.${k}`)
}

/**
 * An error in the provider's documented shape (docs/endpoints.md, Errors), exactly: its members in order, the
 * stable code where the SDK reads it, `param`, and request_id equal to x-request-id. `extra` names the
 * members a code adds (detection, routes). Returns the parsed body.
 */
export function checkNativeError (t: Test, provider: Provider, r: RawResponse, code: ErrorCode, param: string | null = null, extra: readonly string[] = []): any {
  const status = nativeStatus(provider, ERRORS[code].status)
  t.equal(r.status, status, `status ${status}`)
  t.match(String(r.headers['content-type']), /^application\/json/, 'JSON')
  t.match(r.requestId, UUID_V7, 'x-request-id is a UUIDv7')
  const b = json(r)
  const where = (expected: string | undefined, actual: unknown, what: string): void => {
    if (expected === undefined) t.type(actual, 'string', what)
    else t.equal(actual, expected, what)
  }
  switch (provider) {
    case 'alpha':
      t.same(Object.keys(b), ['error'], 'one member, error')
      t.same(Object.keys(b.error ?? {}), ['message', 'type', 'param', 'code', 'request_id', ...extra], 'OpenAI error members')
      t.equal(b.error?.type, ERRORS[code].type, 'type')
      t.equal(b.error?.code, code, 'error.code')
      t.equal(b.error?.param, param, 'error.param')
      t.equal(b.error?.request_id, r.requestId, 'error.request_id is x-request-id')
      break
    case 'beta':
      t.same(Object.keys(b), ['type', 'error', 'request_id'], 'Anthropic error members')
      t.equal(b.type, 'error')
      t.same(Object.keys(b.error ?? {}), ['type', 'message', 'details'])
      where(BETA_TYPES[status], b.error?.type, 'Anthropic error type')
      t.same(Object.keys(b.error?.details ?? {}), ['error_code', 'param', 'request_id', ...extra], 'details members')
      t.equal(b.error?.details?.error_code, code, 'error.details.error_code')
      t.equal(b.error?.details?.param, param, 'error.details.param')
      t.equal(b.error?.details?.request_id, r.requestId, 'details.request_id is x-request-id')
      t.equal(b.request_id, r.requestId, 'request_id is x-request-id')
      break
    case 'gamma': {
      t.same(Object.keys(b), ['error'], 'one member, error')
      t.same(Object.keys(b.error ?? {}), ['code', 'message', 'status', 'details', ...extra], 'Google error members')
      t.equal(b.error?.code, status, 'error.code is the HTTP status')
      where(GAMMA_STATUSES[status], b.error?.status, 'google.rpc status')
      t.same(b.error?.details, [{
        '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
        reason: code,
        domain: 'tracegate',
        metadata: param === null ? { request_id: r.requestId } : { request_id: r.requestId, param },
      }], 'one ErrorInfo: reason is the code, metadata the request id and param')
      break
    }
    default: {
      // A test provider's shape is its module's; tracegate's code, param and request id must be in it.
      sameShape(t, b, moduleError(provider, ERRORS[code].status, code, param, r.requestId, extra).body)
      const values = JSON.stringify(b)
      t.ok(values.includes(JSON.stringify(code)), 'the code is in the error')
      t.ok(values.includes(JSON.stringify(r.requestId)), 'the request id is in the error')
      if (param !== null) t.ok(values.includes(JSON.stringify(param)), 'the param is in the error')
    }
  }
  return b
}

/** The path of the object holding a test provider's extra members in its error shape. */
function extrasPath (provider: Provider): string[] {
  const find = (v: unknown, path: string[]): string[] | null => {
    if (v === null || typeof v !== 'object') return null
    if (Object.hasOwn(v, 'probe')) return path
    for (const [k, x] of Object.entries(v)) { const found = find(x, [...path, k]); if (found !== null) return found }
    return null
  }
  return find(moduleError(provider, 400, 'invalid_field', null, '', ['probe']).body, []) ?? []
}

/** The members a native error adds beyond the shape (detection, routes), wherever the shape puts them. */
export function errorExtras (provider: Provider, b: any): Record<string, any> {
  if (!BUILT_IN.includes(provider)) return extrasPath(provider).reduce((o, k) => o?.[k], b)
  return provider === 'beta' ? b.error.details : b.error
}

interface PriceRow {
  readonly model: string
  readonly as_of: string
}

/** Every model @pydantic/genai-prices prices for the provider, read from the library: what the models routes list. */
export function pricedModels (provider: Provider): PriceRow[] {
  return (findProvider({ providerId: DIALECTS[provider].priceProvider })?.models ?? []).map((m) => ({ model: m.id, as_of: '1970-01-01' }))
}

/** Published prices (USD per million tokens, from each provider's price page) of the models the SDK tests call. */
const PUBLISHED: Readonly<Record<string, Price>> = {
  'gpt-4o-mini': { input_per_mtok: 0.15, cached_input_per_mtok: 0.075, output_per_mtok: 0.6 },
  'claude-sonnet-4-6': { input_per_mtok: 3, cached_input_per_mtok: 0.3, output_per_mtok: 15 },
  'gemini-2.5-flash': { input_per_mtok: 0.3, cached_input_per_mtok: 0.03, output_per_mtok: 2.5 },
}

/** The published price of a model the SDK tests call, which must be listed here. */
export function priceOf (_provider: Provider, model: string): Price {
  const p = PUBLISHED[model]
  if (p === undefined) throw new Error(`no published price for ${model}`)
  return p
}

/**
 * One POST over a raw socket, each header value written as the given bytes (a string: one byte a
 * character, latin1). node's client refuses DEL and writes non-ASCII values as UTF-8 when the body goes
 * in the same write, so a test of exact header bytes needs this. The server closes after answering.
 */
export function postBytes (port: number, path: string, headers: Record<string, string | Buffer>, body: string): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const bytes = Buffer.from(body, 'utf8')
    const head: Buffer[] = [Buffer.from(`POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${bytes.length}\r\n`, 'latin1')]
    for (const [name, value] of Object.entries(headers)) {
      head.push(Buffer.from(`${name}: `, 'latin1'), typeof value === 'string' ? Buffer.from(value, 'latin1') : value, Buffer.from('\r\n', 'latin1'))
    }
    const socket = connect(port, '127.0.0.1')
    socket.write(Buffer.concat([...head, Buffer.from('\r\n', 'latin1'), bytes]))
    const parts: Buffer[] = []
    socket.on('data', (d: Buffer) => { parts.push(d) })
    socket.on('error', reject)
    socket.on('close', () => {
      const all = Buffer.concat(parts)
      const end = all.indexOf('\r\n\r\n')
      if (end === -1) { reject(new Error(`no response head for ${path}`)); return }
      const lines = all.subarray(0, end).toString('latin1').split('\r\n')
      const h: Record<string, string> = {}
      for (const line of lines.slice(1)) h[line.slice(0, line.indexOf(':')).trim().toLowerCase()] = line.slice(line.indexOf(':') + 1).trim()
      const out = all.subarray(end + 4)
      resolve({ status: Number(lines[0]?.split(' ')[1]), headers: h, body: out, text: out.toString('utf8'), requestId: h['x-request-id'] ?? '', complete: true, clientLeft: false, endedAt: 0 })
    })
  })
}
