// The front thread's trace batch: what the sink writes is what the store worker reads, field for field
// and byte for byte, across buffer growth.
import t from 'tap'
import { decodeTraces, TraceBatchWriter, type TraceMeta } from '../../src/store/trace-codec.js'

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
  requestBytes: 5000 + i,
  responseBytes: 70_000 + i,
  chunkMarks: i % 2 === 1 ? [10, 1.5, 20 + i, 2.25] : null,
  latencyMs: 12.345 + i,
  ttfbMs: i % 3 === 0 ? null : 3.5,
  providerMs: i % 7 === 0 ? null : 11.125,
  overheadMs: 0.25,
  detection: i % 2 === 0 ? '' : '{"ran":true,"score":0.01}',
  issues: i % 2 === 0 ? '' : '[{"category":"email","detail":"a***@b.c"}]',
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
