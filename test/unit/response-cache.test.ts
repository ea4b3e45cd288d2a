// What the response cache keeps (proxy/response-cache.ts): a 2xx answer that reached the client whole and
// fits the entry bound, for its TTL, within the byte bound (least recently used out first); never an error
// answer, a cut one or a larger one. The key changes with every part of the call and holds none of it.
import t from 'tap'
import { CacheFill, ResponseCache, type CacheKeyParts } from '../../src/proxy/response-cache.js'

const cache = (maxBytes = 1 << 20, maxEntryBytes = 1024): ResponseCache => new ResponseCache({ maxBytes, maxEntryBytes, maxTtlS: 60, redisUrl: null })
const parts: CacheKeyParts = { accountId: 'a', provider: 'alpha', path: '/v1/chat/completions', targets: ['https://api.openai.com'], headers: [['openai-beta', 'x']], body: Buffer.from('{"model":"m","messages":[]}') }

function fill (c: ResponseCache, key: string, status: number, chunks: string[], whole: boolean, ttlS = 60): void {
  const f = new CacheFill(c, key, ttlS)
  f.start(status, ['content-type', 'application/json'])
  for (const chunk of chunks) f.add(Buffer.from(chunk))
  f.end(whole)
}

t.test('a whole 2xx answer is kept, its chunks as one body', async (t) => {
  const c = cache()
  fill(c, 'k', 200, ['{"a":', '1}'], true)
  const got = c.get('k')
  t.ok(got !== null && !(got instanceof Promise))
  const a = got as Exclude<typeof got, Promise<unknown> | null>
  t.same({ status: a.status, headers: a.headers, body: a.body.toString() }, { status: 200, headers: ['content-type', 'application/json'], body: '{"a":1}' })
})

t.test('never an error answer, a cut one or one over the entry bound', async (t) => {
  const c = cache(1 << 20, 8)
  fill(c, 'error', 500, ['{}'], true)
  fill(c, 'limited', 429, ['{}'], true)
  fill(c, 'cut', 200, ['{"a":'], false)
  fill(c, 'large', 200, ['12345', '6789'], true)
  fill(c, 'fits', 200, ['12345678'], true)
  for (const k of ['error', 'limited', 'cut', 'large']) t.equal(c.get(k), null, `${k}: not kept`)
  t.not(c.get('fits'), null, 'an answer at the bound is kept')
})

t.test('the byte bound puts the least recently used out first', async (t) => {
  const c = cache(3 * (256 + 600 + 30), 1024)
  const body = 'x'.repeat(600)
  fill(c, 'one', 200, [body], true)
  fill(c, 'two', 200, [body], true)
  fill(c, 'three', 200, [body], true)
  t.not(c.get('one'), null, 'three fit')
  fill(c, 'four', 200, [body], true)
  t.equal(c.get('two'), null, 'the least recently used went')
  t.not(c.get('one'), null, 'the one read since stayed')
  t.ok(c.stats.bytes <= 3 * (256 + 600 + 30), `within the bound (${c.stats.bytes} bytes, ${c.stats.entries} answers)`)
})

t.test('an answer lasts its TTL', async (t) => {
  const c = cache()
  fill(c, 'short', 200, ['{}'], true, 1)
  t.not(c.get('short'), null)
  await new Promise((resolve) => setTimeout(resolve, 1_100))
  t.equal(c.get('short'), null, 'gone after it')
})

t.test('the key: every part of the call changes it, and none can be read from it', async (t) => {
  const base = ResponseCache.key(parts)
  t.equal(ResponseCache.key({ ...parts, body: Buffer.from(parts.body) }), base, 'the same call, the same key')
  const changed: Array<[string, CacheKeyParts]> = [
    ['account', { ...parts, accountId: 'b' }],
    ['provider', { ...parts, provider: 'beta' }],
    ['path', { ...parts, path: '/v1/responses' }],
    ['targets', { ...parts, targets: ['https://api.openai.com', 'https://eu.example.net'] }],
    ['target order', { ...parts, targets: ['https://eu.example.net', 'https://api.openai.com'] }],
    ['a header', { ...parts, headers: [['openai-beta', 'y']] }],
    ['no header', { ...parts, headers: [] }],
    ['body', { ...parts, body: Buffer.from('{"model":"m","messages":[] }') }],
    // Length-prefixed fields: moving bytes from one part to the next is another call.
    ['a split moved', { ...parts, accountId: 'a/v1', path: '/chat/completions' }],
  ]
  for (const [what, p] of changed) t.not(ResponseCache.key(p), base, what)
  t.match(base, /^[A-Za-z0-9_-]{43}$/, 'a SHA-256, base64url')
  t.notOk(base.includes('model'), 'nothing of the call in it')
})
