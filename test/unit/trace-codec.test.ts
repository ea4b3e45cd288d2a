// The front thread's trace batch: what the sink writes is what the store worker reads, field for field
// and byte for byte, across buffer growth.
import t from 'tap'
import { decodeTraces, TraceBatchWriter, type TraceMeta } from '../../src/store/trace-codec.js'
import type { CallLabels } from '../../src/store/trace-types.js'

const meta = (i: number): TraceMeta => ({
  traceId: `0190a1b2-c3d4-7e5f-8a9b-${String(i).padStart(12, '0')}`,
  accountId: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b',
  keyId: '0190a1b2-c3d4-7e5f-8a9b-6c7d8e9f0a1b',
  time: 1_795_000_000_000 + i,
  provider: i % 2 === 0 ? 'alpha' : 'gamma',
  model: i % 3 === 0 ? 'modèle-東京-😀' : 'gpt-4o-mini',
  endpoint: '/api/alpha_service/chat_completion',
  streaming: i % 2 === 1,
  confidential: i % 5 === 0,
  status: i % 4 === 0 ? 502 : 200,
  outcome: i % 4 === 0 ? 'provider_error' : 'ok',
  errorCode: i % 4 === 0 ? 'provider_unreachable' : '',
  errorCause: i % 4 === 0 ? 'connect_refused: connect ECONNREFUSED 127.0.0.1:9' : '',
  attempts: i % 5 === 0 ? JSON.stringify([{ target: 'http://127.0.0.1:9', key_id: '', status: 503, ms: 1.5, cause: 'status 503' }, { target: 'http://127.0.0.1:10', key_id: '', status: 200, ms: 2, cause: '' }]) : '',
  requestBytes: 5000 + i,
  responseBytes: 70_000 + i,
  chunkMarks: i % 2 === 1 ? [10, 1.5, 20 + i, 2.25] : null,
  latencyMs: 12.345 + i,
  ttfbMs: i % 3 === 0 ? null : 3.5,
  providerMs: i % 7 === 0 ? null : 11.125,
  overheadMs: 0.25,
  detection: i % 2 === 0 ? '' : '{"ran":true,"score":0.01}',
  issues: i % 2 === 0 ? '' : '[{"category":"email","detail":"a***@b.c"}]',
  labels: i % 3 === 1 ? { user: `user-${i}`, session: 'sess-é', tags: i % 2 === 0 ? [] : ['a', `t${i}`], metadata: { i: String(i) } } : null,
  span: i % 4 === 1 ? { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: `00f067aa0ba902${String(i).padStart(2, '0')}`, parentSpanId: i % 8 === 1 ? '' : '00f067aa0ba902b7', tracestate: i % 8 === 1 ? '' : 'vendor=é?' } : null,
  stored: i % 6 !== 5,
  maskPii: i % 3 === 2,
})

t.test('a batch round-trips, with growth past the initial buffer', async (t) => {
  const w = new TraceBatchWriter(64)
  const expected = []
  for (let i = 0; i < 40; i++) {
    const request = Buffer.from(`{"i":${i},"text":"${'é'.repeat(i * 50)}"}`)
    const requestLength = Math.min(request.length, 100)
    const head = [Buffer.from(`head-${i}-a;`), Buffer.from(`head-${i}-b;`)]
    const tail = i % 2 === 0 ? [] : [Buffer.from(`tail-${i}`)]
    const m = meta(i)
    w.add(m, request, requestLength, head, head[0]!.length + head[1]!.length, tail, tail.reduce((n, c) => n + c.length, 0))
    expected.push({ m, bytes: Buffer.concat([request.subarray(0, requestLength), ...head, ...tail]), requestLength, headLength: head[0]!.length + head[1]!.length })
  }
  w.add(meta(99), null, 0, [], 0, [], 0)
  t.equal(w.count, 41)
  const batch = w.take()
  t.equal(w.count, 0, 'take() starts a new batch')
  t.equal(batch.count, 41)
  const got = decodeTraces(batch)
  t.equal(got.length, 41)
  for (let i = 0; i < 40; i++) {
    const g = got[i]!
    const e = expected[i]!
    const { bytes, requestLength, headLength, ...fields } = g
    t.same(fields, e.m, `record ${i}: every field`)
    t.same(Buffer.from(bytes), e.bytes, `record ${i}: request, head and tail bytes`)
    t.equal(requestLength, e.requestLength)
    t.equal(headLength, e.headLength)
  }
  t.equal(got[40]!.bytes.length, 0, 'a record without a body or response')
  t.equal(got[40]!.traceId, meta(99).traceId)
})

const HOSTILE_METADATA = JSON.parse('{"__proto__":"p","constructor":"c","hasOwnProperty":"h","":"empty key","k\'\\t\\n":"v\\u0000\\\\","東京":"😀"}') as Record<string, string>

/** Labels as the front thread may hand them: none, empty, hostile, and every bound at its limit. */
const LABELS: ReadonlyArray<readonly [string, CallLabels | null]> = [
  ['none', null],
  ['empty', { user: '', session: '', tags: [], metadata: {} }],
  ['hostile', {
    user: "o'brien\\\t\n\r\0\u0001\u007f",
    session: '{"json":[1,2]}',
    tags: ["a'b", 'c,d', '[x]', '', ' ', 'é東😀', '\u2028\u2029', '\ufeffbom'],
    metadata: HOSTILE_METADATA,
  }],
  // 256 four-byte characters (1 KiB of UTF-8); 32 tags of 64 characters; 64 keys of 64 characters whose
  // values fill the 4096-byte header.
  ['max', {
    user: '😀'.repeat(256),
    session: '東'.repeat(256),
    tags: Array.from({ length: 32 }, (_, i) => `${String(i).padStart(2, '0')}${'é'.repeat(62)}`),
    metadata: Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`${String(i).padStart(2, '0')}${'k'.repeat(62)}`, 'v'.repeat(i)])),
  }],
]

t.test('labels round-trip: none, empty, hostile strings, prototype keys, every bound at its limit', async (t) => {
  const w = new TraceBatchWriter(64)
  for (const [, labels] of LABELS) w.add({ ...meta(1), labels }, Buffer.from('req'), 3, [Buffer.from('res')], 3, [], 0)
  const got = decodeTraces(w.take())
  t.equal(got.length, LABELS.length)
  for (const [i, [what, labels]] of LABELS.entries()) {
    const g = got[i]!
    t.strictSame(g.labels === null ? null : { ...g.labels, metadata: { ...g.labels.metadata } },
      labels === null ? null : { ...labels, metadata: { ...labels.metadata } }, `${what}: read as written`)
    if (labels !== null) t.same(Object.keys(g.labels!.metadata), Object.keys(labels.metadata), `${what}: metadata keys in order`)
    t.equal(Buffer.from(g.bytes).toString(), 'reqres', `${what}: the record's bytes follow its labels`)
  }
  const md = got[2]!.labels!.metadata
  t.equal(Object.getPrototypeOf(md), null, 'metadata has no prototype')
  t.same(Object.getOwnPropertyDescriptor(md, '__proto__'), { value: 'p', writable: true, enumerable: true, configurable: true },
    '__proto__ is an own key like any other')
  t.equal(md.constructor, 'c', 'and so is constructor')
})

t.test('a lone surrogate becomes U+FFFD without shifting what follows', async (t) => {
  const w = new TraceBatchWriter(16)
  w.add({ ...meta(1), labels: { user: 'a\ud800b', session: '\udc00', tags: ['\ud83d'], metadata: { '\udfff': 'x\ud800' } } }, null, 0, [], 0, [], 0)
  w.add(meta(2), Buffer.from('next'), 4, [], 0, [], 0)
  const [a, b] = decodeTraces(w.take())
  t.strictSame({ ...a!.labels!, metadata: { ...a!.labels!.metadata } },
    { user: 'a\ufffdb', session: '\ufffd', tags: ['\ufffd'], metadata: { '\ufffd': 'x\ufffd' } })
  t.equal(b!.traceId, meta(2).traceId, 'the next record is intact')
  t.equal(Buffer.from(b!.bytes).toString(), 'next')
})

t.test('an exchange without labels costs one flag bit: no byte of the record is theirs', async (t) => {
  const size = (labels: CallLabels | null): number => {
    const w = new TraceBatchWriter(64)
    w.add({ ...meta(2), labels }, null, 0, [], 0, [], 0)
    return w.take().length
  }
  const m = meta(2)
  const strings = [m.traceId, m.accountId, m.keyId, m.provider, m.model, m.endpoint, m.outcome, m.errorCode, m.errorCause, m.detection, m.issues]
  // 11 numbers, the flag byte, the chunk mark count (-1: none), then each string with its length word.
  const fixed = 11 * 8 + 1 + 4 + strings.reduce((n, s) => n + 4 + Buffer.byteLength(s), 0)
  t.equal(size(null), fixed, 'no labels: the record is its other fields alone')
  t.equal(size({ user: '', session: '', tags: [], metadata: {} }), fixed + 16, 'empty labels given: four length words')
  // User and session fill their length words; a tag, a key and a value each add a length word and a byte.
  t.equal(size({ user: 'u', session: 's', tags: ['t'], metadata: { k: 'v' } }), fixed + 16 + 2 + 3 * 5, 'each string is its bytes and a length word')
})
