// The TabSeparated trace batch: escapes, cuts at character boundaries, and a round trip of hostile bytes
// through the real embedded ClickHouse (every byte a prompt can hold comes back as it went in).
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { MIGRATIONS_DIR } from '../../src/store/client.js'
import { connect, insertTsv } from '../../src/store/worker/connect.js'
import { migrate } from '../../src/store/worker/migrate.js'
import { Pricing } from '../../src/pricing/index.js'
import { buildRecord, encodeRecord, TRACE_COLUMNS } from '../../src/store/worker/rows.js'
import type { CallLabels, RawTrace, TraceRow } from '../../src/store/trace-types.js'
import { emptyFilter, listTraces } from '../../src/store/worker/trace-queries.js'
import type { TraceFilter } from '../../src/store/query-types.js'
import { TsvWriter, utf8End } from '../../src/store/worker/tsv.js'

t.test('escapes: the seven TSV escapes, every other byte as is', async (t) => {
  const all = Uint8Array.from({ length: 256 }, (_, i) => i)
  const out = new TsvWriter(16).bytes(all).view()
  const expected: number[] = []
  const esc: Record<number, string> = { 0: '0', 8: 'b', 9: 't', 10: 'n', 12: 'f', 13: 'r', 92: '\\' }
  for (let i = 0; i < 256; i++) {
    if (esc[i] !== undefined) expected.push(0x5c, esc[i]!.charCodeAt(0))
    else expected.push(i)
  }
  t.same([...out], expected, 'all 256 byte values')
  const w = new TsvWriter(4)
  w.string('a\tb\\c\nd').number(1.5).number(null).bool(true).bool(false).string('é東')
  w.endRow()
  w.string('x')
  w.endRow()
  t.equal(w.view().toString('utf8'), 'a\\tb\\\\c\\nd\t1.5\t\\N\ttrue\tfalse\té東\nx\n', 'fields, NULL, booleans, rows; the buffer grows')
  const rows = w.size
  w.string('half a row')
  w.rewind(rows)
  w.string('y')
  w.endRow()
  t.equal(w.view().toString('utf8'), 'a\\tb\\\\c\\nd\t1.5\t\\N\ttrue\tfalse\té東\nx\ny\n', 'rewind drops a half-written row')
  const given = Buffer.alloc(64)
  const into = new TsvWriter(given).string('z')
  into.endRow()
  t.equal(into.view().buffer, given.buffer, 'a writer given a buffer writes into it')
})

t.test('Array(String) and Map(String, String) fields: quoted elements, one level of escapes', async (t) => {
  const w = new TsvWriter(8)
  w.strings([]).map({}).strings(["a'b", 'c\\d', 'tab\there', 'nl\n', 'nul\0', ',]', 'é東😀', ''])
    .map(JSON.parse('{"__proto__":"p","k\'":"v\\r","":"{}"}') as Record<string, string>)
  w.endRow()
  t.equal(w.view().toString('utf8'),
    "[]\t{}\t['a\\'b','c\\\\d','tab\\there','nl\\n','nul\\0',',]','é東😀','']\t{'__proto__':'p','k\\'':'v\\r','':'{}'}\n",
    'no raw tab or newline inside a field; a quote and a backslash escaped inside the quotes')
})

t.test('utf8End never ends inside a character', async (t) => {
  const s = Buffer.from('aé東😀')// 1 + 2 + 3 + 4 bytes
  const cases: Array<[number, number]> = [[0, 0], [1, 1], [2, 1], [3, 3], [4, 3], [5, 3], [6, 6], [7, 6], [8, 6], [9, 6], [10, 10]]
  for (const [end, want] of cases) t.equal(utf8End(s, end), want, `cut at ${end}`)
  t.equal(utf8End(Buffer.from([0x80, 0x80]), 2), 2, 'stray continuation bytes are left for the validity check')
})

// One embedded ClickHouse for the round trips below (chDB allows one data directory per process).
const dir = mkdtempSync(join(tmpdir(), 'tracegate-tsv-'))
const ch = await connect(dir, null)
t.teardown(async () => {
  await ch.close()
  rmSync(dir, { recursive: true, force: true })
})
await migrate(ch, MIGRATIONS_DIR)

t.test('hostile bytes round-trip through embedded ClickHouse', async (t) => {
  const accountId = randomUUID()
  // JSON allows raw tab, newline and carriage return between tokens; inside strings every escape
  // leaves a backslash in the bytes.
  const prompt = '{\r\n\t"messages": [{"role": "user", "content": "tab\\there \\\\ back\\nslash \\u0000 \\"q\\" é東😀"}]\n}'
  const response = Buffer.concat([Buffer.from('{"text":"ok"} then junk '), Buffer.from([0xff, 0xfe]), Buffer.from(' and a cut 😀')])
  const cut = response.length - 2 // inside the emoji's four bytes
  const raw = (traceId: string, confidential: boolean): RawTrace => {
    const req = Buffer.from(prompt)
    const bytes = new Uint8Array(req.length + cut)
    bytes.set(req, 0)
    bytes.set(response.subarray(0, cut), req.length)
    return {
      traceId, accountId, keyId: randomUUID(), time: Date.UTC(2026, 10, 23, 12, 0, 0, 7), provider: 'alpha', model: 'm\tx',
      endpoint: '/api/alpha_service/chat_completion', streaming: false, confidential, status: 200, outcome: 'ok', errorCode: '', errorCause: '', attempts: '',
      bytes, requestLength: req.length, requestBytes: req.length, headLength: cut, responseBytes: response.length,
      chunkMarks: null, latencyMs: 12.5, ttfbMs: null, providerMs: 11, overheadMs: 0.25,
      detection: '{"a":"\\n"}', issues: '[]', labels: null, span: null, stored: true,
    }
  }
  const ids = [randomUUID(), randomUUID()]
  // Two parts, as the writer inserts rows that arrived in different messages.
  const w1 = new TsvWriter(64)
  const w2 = new TsvWriter(64)
  const pricing = Pricing.load(null)
  encodeRecord(w1, buildRecord(raw(ids[0]!, false), pricing))
  encodeRecord(w2, buildRecord(raw(ids[1]!, true), pricing))
  await insertTsv(ch, 'traces', TRACE_COLUMNS, [w1.view(), w2.view()], { insert_deduplication_token: randomUUID() })

  const rs = await ch.query({
    query: 'SELECT * FROM traces WHERE account_id = {a:UUID} ORDER BY confidential',
    query_params: { a: accountId },
    format: 'JSONEachRow',
  })
  const rows = await rs.json<TraceRow>()
  t.equal(rows.length, 2)
  const [open, secret] = rows as [TraceRow, TraceRow]
  t.equal(open.trace_id, ids[0])
  t.equal(open.prompt, prompt, 'the prompt, byte for byte')
  t.equal(open.response, '{"text":"ok"} then junk \ufffd\ufffd and a cut ', 'invalid bytes replaced, the cut character dropped')
  t.equal(open.response_truncated, true)
  t.equal(open.model, 'm\tx')
  t.equal(open.time, '2026-11-23 12:00:00.007')
  t.equal(open.detection, '{"a":"\\n"}')
  t.equal(open.ttfb_ms, null, 'NULL stays NULL')
  t.equal(open.latency_ms, 12.5)
  t.equal(secret.prompt, '', 'confidential: no prompt')
  t.equal(secret.response, '', 'confidential: no response')
  t.equal(secret.detection, '')
})

t.test('labels round-trip through embedded ClickHouse and are found by the list filters', async (t) => {
  const accountId = randomUUID()
  const labels: CallLabels = {
    user: "o'brien\\ \t\n\r\0\b\f\u0001 [{é東😀}] ,:",
    session: "'\\'",
    tags: ["a'b", 'c,d', '[x]', '{y}', "\\'", '', 'nl\nx', 'nul\0x', '東😀'],
    metadata: JSON.parse('{"__proto__":"p","constructor":"c","k\'\\t":"v\\u0000\\\\","":"","東":"😀","json":"{\\"a\\":[1,\\"\'\\"]}"}') as Record<string, string>,
  }
  const max: CallLabels = {
    user: '😀'.repeat(256),
    session: 's'.repeat(256),
    tags: Array.from({ length: 32 }, (_, i) => `${String(i).padStart(2, '0')}${'é'.repeat(62)}`),
    metadata: Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`${String(i).padStart(2, '0')}${'k'.repeat(62)}`, `'\\${i}`])),
  }
  const cases: Array<[string, CallLabels | null]> = [['hostile', labels], ['max', max], ['none', null]]
  const w = new TsvWriter(64)
  const pricing = Pricing.load(null)
  const ids = cases.map(() => randomUUID())
  for (const [i, [, l]] of cases.entries()) {
    const raw: RawTrace = {
      traceId: ids[i]!, accountId, keyId: randomUUID(), time: Date.UTC(2026, 10, 23, 12, 0, 0, i), provider: 'alpha', model: 'm',
      endpoint: '/v1/chat/completions', streaming: false, confidential: false, status: 200, outcome: 'ok', errorCode: '', errorCause: '', attempts: '',
      bytes: new Uint8Array(0), requestLength: 0, requestBytes: 0, headLength: 0, responseBytes: 0, chunkMarks: null, latencyMs: 1,
      ttfbMs: null, providerMs: null, overheadMs: 0, detection: '', issues: '', labels: l, span: null, stored: true,
    }
    encodeRecord(w, buildRecord(raw, pricing))
  }
  await insertTsv(ch, 'traces', TRACE_COLUMNS, [w.view()], { insert_deduplication_token: randomUUID() })
  const rs = await ch.query({
    query: 'SELECT trace_id, user, session, tags, metadata FROM traces WHERE account_id = {a:UUID} ORDER BY time',
    query_params: { a: accountId },
    format: 'JSONEachRow',
  })
  const rows = await rs.json<Pick<TraceRow, 'trace_id' | 'user' | 'session' | 'tags' | 'metadata'>>()
  t.equal(rows.length, 3)
  for (const [i, [what, l]] of cases.entries()) {
    const { trace_id: id, ...stored } = rows[i]!
    t.equal(id, ids[i])
    t.strictSame(stored, l ?? { user: '', session: '', tags: [], metadata: {} }, `${what}: every label as it was`)
    t.same(Object.keys(stored.metadata), Object.keys(l?.metadata ?? {}), `${what}: metadata keys in order`)
  }
  const filter = emptyFilter(accountId, 10)
  const found = async (f: Partial<TraceFilter>): Promise<string[]> => (await listTraces(ch, { ...filter, ...f })).traces.map((x) => x.trace_id)
  t.same(await found({ user: labels.user }), [ids[0]], 'user, exactly')
  t.same(await found({ session: max.session }), [ids[1]], 'session, exactly')
  t.same(await found({ tag: "\\'" }), [ids[0]], 'a tag of a backslash and a quote')
  t.same(await found({ tag: '' }), [ids[0]], 'an empty tag is a tag')
  t.same(await found({ tag: 'c' }), [], 'part of a tag is not the tag')
  t.same(await found({ tag: max.tags[31]!, user: max.user }), [ids[1]], 'the last tag with the user')
})
