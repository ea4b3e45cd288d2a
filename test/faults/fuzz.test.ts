// Seeded fuzzing of the front end: 450 malformed bodies on the three provider routes, and broken raw
// heads (HEAD_CASES with random extra headers, and random bytes) on both ports. Every answer must be a
// JSON 4xx whose code is in src/errors.ts and in the docs; a head uWS 20.30 cannot answer must be
// closed as cases.ts says (at once, or by its idle timer). Nothing may reach the provider, and /healthz
// answers throughout.
import { readdirSync, readFileSync } from 'node:fs'
import t from 'tap'
import { repoFile } from '../../src/paths.js'
import { ERRORS } from '../../src/errors.js'
import { startServer } from '../helpers/server.js'
import { send } from '../helpers/http.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { HEAD_CASES, HELD_MAX_MS, PROMPT_MS } from './cases.js'
import { parseResponse, rawRequest } from '../helpers/raw-call.js'

const s = await startServer(t)
type Provider = keyof typeof ROUTES
const PROVIDERS = Object.keys(ROUTES) as Provider[]

/** mulberry32: the same cases on every run. */
function rng (seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}
const rand = rng(0x7ace6a7e)
const int = (n: number): number => Math.floor(rand() * n)
const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!

/** Codes the docs document (the README and docs/): every backticked name that is also in the error table. */
const pages = ['README.md', ...readdirSync(repoFile('docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]
const readme = pages.map((p) => readFileSync(repoFile(p), 'utf8')).join('\n')
const DOCUMENTED = new Set([...readme.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!).filter((c) => c in ERRORS))

interface BodyCase { readonly family: string; readonly body: Buffer; readonly codes: readonly string[] }

const text = (p: Provider, fields: Record<string, unknown> = {}): string => JSON.stringify(bodyFor(p, { api_key: s.key, ...fields }))
/** `text` with raw members spliced in before the closing brace. */
const spliced = (p: Provider, raw: string): string => `${text(p).slice(0, -1)},${raw}}`

const FAMILIES: ReadonlyArray<[string, (p: Provider) => { body: string | Buffer; codes: readonly string[] }]> = [
  ['truncated JSON', (p) => { const b = text(p); return { body: b.slice(0, int(b.length)), codes: ['invalid_json'] } }],
  ['invalid UTF-8', (p) => {
    const b = Buffer.from(text(p, { messages: [{ role: 'user', content: 'héllo wörld' }] }))
    const bad = pick([[0x80], [0xc0, 0xaf], [0xff], [0xed, 0xa0, 0x80], [0xf5, 0x80, 0x80, 0x80], [0xe2, 0x82]])
    const at = b.indexOf('héllo') + int(5)
    return { body: Buffer.concat([b.subarray(0, at), Buffer.from(bad), b.subarray(at)]), codes: ['invalid_json'] }
  }],
  ['deep nesting', (p) => {
    const n = 1000 + int(200_000)
    const nest = '['.repeat(n) + ']'.repeat(n)
    return pick([
      { body: nest, codes: ['invalid_json'] },
      { body: '{"a":' + '{"a":'.repeat(n) + '1' + '}'.repeat(n + 1), codes: ['missing_api_key'] },
      { body: spliced(p, `"is_confidential":${nest}`), codes: ['invalid_field'] },
      { body: '['.repeat(n), codes: ['invalid_json'] },
    ])
  }],
  ['huge numbers', (p) => {
    const huge = pick(['1e400', '-1e400', '9'.repeat(400), '123456789012345678901234567890', '1.' + '0'.repeat(300) + '1'])
    return pick([
      { body: huge, codes: ['invalid_json'] },
      { body: JSON.stringify(bodyFor(p)).slice(0, -1) + `,"api_key":${huge}}`, codes: ['invalid_field'] },
      { body: spliced(p, `"is_confidential":${huge}`), codes: ['invalid_field'] },
    ])
  }],
  ['duplicate service fields', (p) => {
    const field = pick(['api_key', 'is_confidential', `${p}_api_key`])
    // The base body has api_key and the provider key once; is_confidential is given twice here.
    const raw = field === 'is_confidential' ? '"is_confidential":false,"is_confidential":true' : `"${field}":${JSON.stringify(field === 'api_key' ? s.key : 'sk-x')}`
    return { body: spliced(p, raw), codes: ['duplicate_field'] }
  }],
  ['escaped service names', (p) => {
    const spelling = pick(['api\\u005fkey', '\\u0061pi_key', 'api_\\u006bey', '\\u0061\\u0070\\u0069\\u005f\\u006b\\u0065\\u0079', 'is\\u005fconfidential'])
    const raw = spelling.startsWith('is') ? `"is_confidential":true,"${spelling}":true` : `"${spelling}":${JSON.stringify(s.key)}`
    return { body: spliced(p, raw), codes: ['duplicate_field'] }
  }],
  ['not an object', () => ({ body: pick(['[]', '[{"api_key":"x"}]', '"api_key"', '42', 'null', 'true', 'false', '', ' ', '\n\t ']), codes: ['invalid_json'] })],
  ['NUL bytes', (p) => {
    const b = text(p)
    const at = pick([0, b.length, b.indexOf('Hello') + 2, b.indexOf('"model"')])
    return { body: b.slice(0, at) + '\u0000' + b.slice(at), codes: ['invalid_json'] }
  }],
  ['wrong types', (p) => {
    const [field, value] = pick<[string, unknown]>([
      ['api_key', 42], ['api_key', ['tgk_x']], ['api_key', { k: 1 }], ['api_key', true], ['api_key', null],
      ['is_confidential', 'true'], ['is_confidential', 1], ['is_confidential', null],
      [`${p}_api_key`, 7], [`${p}_api_key`, ['sk']],
      [pick(PROVIDERS.filter((q) => q !== p)) + '_api_key', 'sk-other'],
    ])
    const b = bodyFor(p, { api_key: s.key }) as Record<string, unknown>
    b[field] = value
    return { body: JSON.stringify(b), codes: ['invalid_field', 'missing_api_key'] }
  }],
  ['byte order marks', (p) => ({ body: pick(['\ufeff', '\ufeff\ufeff', '\ufffe']) + text(p), codes: ['invalid_json'] })],
  ['trailing bytes', (p) => ({ body: text(p) + pick(['x', '{}', ',', ']', '\u0000', ' }']), codes: ['invalid_json'] })],
  ['keys that are not keys', (p) => ({
    body: JSON.stringify(bodyFor(p, { api_key: pick(['', 'tgk_', 'tgk_' + 'A'.repeat(43), 'sk-live', s.key + ' ', '\ud800', s.key.toUpperCase()]) })),
    codes: ['invalid_api_key'],
  })],
  ['control characters in strings', (p) => {
    const b = text(p)
    const at = b.indexOf('Hello') + int(5)
    return { body: b.slice(0, at) + String.fromCharCode(1 + int(31)) + b.slice(at), codes: ['invalid_json'] }
  }],
]

const BODIES: BodyCase[] = []
for (let i = 0; i < 450; i++) {
  const [family, make] = FAMILIES[i % FAMILIES.length]!
  const p = pick(PROVIDERS)
  const made = make(p)
  BODIES.push({ family: `${family} (${p})`, body: Buffer.isBuffer(made.body) ? made.body : Buffer.from(made.body), codes: made.codes })
}

async function pool<T> (items: readonly T[], width: number, run: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) await run(items[next++]!)
  }))
}

let healthy = 0
const unhealthy: string[] = []
const poll = setInterval(() => {
  fetch(s.url + '/healthz').then((r) => { if (r.status === 200) healthy++; else unhealthy.push(String(r.status)) }, (err: Error) => { unhealthy.push(err.message) })
}, 200)
t.teardown(() => { clearInterval(poll) })

t.test(`${BODIES.length} malformed bodies: each a documented JSON 4xx with its family's code`, async (t) => {
  const before = s.mock.stats.received
  const wrong: string[] = []
  await pool(BODIES, 6, async (c) => {
    const p = c.family.slice(c.family.lastIndexOf('(') + 1, -1) as Provider
    const r = await send(s.url + ROUTES[p], { body: c.body })
    let code = ''
    try { code = JSON.parse(r.body.toString('utf8')).error.code } catch {}
    const ok = r.status >= 400 && r.status < 500 && r.headers['content-type'] === 'application/json' &&
      DOCUMENTED.has(code) && ERRORS[code as keyof typeof ERRORS].status === r.status && c.codes.includes(code)
    if (!ok) wrong.push(`${c.family}: ${r.status} ${code || r.body.toString('utf8').slice(0, 80)} (wanted ${c.codes.join('|')}) body ${JSON.stringify(c.body.toString('latin1').slice(0, 120))}`)
  })
  t.same(wrong, [], 'every body answered as its family says')
  t.equal(s.mock.stats.received, before, 'nothing reached the provider')
})

interface RawCase { readonly name: string; readonly port: number; readonly bytes: Buffer; readonly fate: string }

const PATHS: ReadonlyArray<[port: number, path: string, body: string]> = [
  ...PROVIDERS.map((p): [number, string, string] => [s.tg.proxyPort, ROUTES[p], text(p)]),
  [s.tg.proxyPort, '/healthz', ''],
  [s.tg.dashboardPort, '/api/ui/signin', '{"email":"a@example.com","password":"x"}'],
  [s.tg.dashboardPort, '/api/v1/traces', ''],
]
const RAW: RawCase[] = []
for (const c of HEAD_CASES) {
  for (let i = 0; i < 4; i++) {
    const [port, path, body] = i === 0 ? PATHS[0]! : pick(PATHS)
    let bytes = c.bytes(path, body)
    // Harmless extra headers where the head has the usual host line, so the cases differ in more than the path.
    const extra = Array.from({ length: int(4) }, (_, k) => `x-fuzz-${k}: ${Math.floor(rand() * 1e9).toString(36)}\r\n`).join('')
    bytes = bytes.replace('host: x\r\n', 'host: x\r\n' + extra)
    RAW.push({ name: `${c.name} → ${port === s.tg.proxyPort ? 'proxy' : 'dashboard'} ${path}`, port, bytes: Buffer.from(bytes, 'latin1'), fate: c.fate })
  }
}
for (let i = 0; i < 40; i++) {
  const bytes = Buffer.alloc(1 + int(300))
  for (let k = 0; k < bytes.length; k++) bytes[k] = int(256)
  RAW.push({ name: `random bytes #${i}`, port: i % 4 === 0 ? s.tg.dashboardPort : s.tg.proxyPort, bytes, fate: 'any' })
}

t.test(`${RAW.length} broken raw requests: answered with a documented 4xx, or closed as the README says`, async (t) => {
  const before = s.mock.stats.received
  const wrong: string[] = []
  await Promise.all(RAW.map(async (c) => {
    const r = await rawRequest(c.port, c.bytes, HELD_MAX_MS + 4000)
    const answer = parseResponse(r.bytes)
    let code = ''
    try { code = answer === null ? '' : JSON.parse(answer.body.toString('utf8')).error.code } catch {}
    const answered = answer !== null && answer.status >= 400 && answer.status < 500 && DOCUMENTED.has(code) && answer.length === r.bytes.length
    const silent = r.bytes.length === 0
    const prompt = r.closedMs !== null && r.closedMs < PROMPT_MS
    const closed = r.closedMs !== null && r.closedMs <= HELD_MAX_MS
    const ok = c.fate === 'answer' ? answered && code === 'malformed_request' && prompt
      : c.fate === 'close' ? silent && prompt
        : c.fate === 'held' ? silent && closed && !prompt
          : (answered || silent) && closed
    if (!ok) wrong.push(`${c.name}: ${c.fate}, got ${r.bytes.length} bytes ${JSON.stringify(r.bytes.toString('latin1').slice(0, 60))} closed after ${r.closedMs?.toFixed(0) ?? 'never'} ms`)
  }))
  t.same(wrong, [], 'every raw request met its fate')
  t.equal(s.mock.stats.received, before, 'nothing reached the provider')
})

t.test('the process lived: /healthz answered throughout', async (t) => {
  t.same(unhealthy, [], 'no /healthz failed')
  t.ok(healthy > 30, `${healthy} answers`)
  t.ok(DOCUMENTED.has('malformed_request') && DOCUMENTED.has('invalid_json'), 'the README documents the codes checked against')
})
