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
import { buildRecord, encodeRecord, TRACE_COLUMNS, type TraceRow } from '../../src/store/worker/rows.js'
import type { RawTrace } from '../../src/store/trace-types.js'
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

t.test('utf8End never ends inside a character', async (t) => {
  const s = Buffer.from('aé東😀')// 1 + 2 + 3 + 4 bytes
  const cases: Array<[number, number]> = [[0, 0], [1, 1], [2, 1], [3, 3], [4, 3], [5, 3], [6, 6], [7, 6], [8, 6], [9, 6], [10, 10]]
  for (const [end, want] of cases) t.equal(utf8End(s, end), want, `cut at ${end}`)
  t.equal(utf8End(Buffer.from([0x80, 0x80]), 2), 2, 'stray continuation bytes are left for the validity check')
})

t.test('hostile bytes round-trip through embedded ClickHouse', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tracegate-tsv-'))
  const ch = await connect(dir, null)
  t.teardown(async () => {
    await ch.close()
    rmSync(dir, { recursive: true, force: true })
  })
  await migrate(ch, MIGRATIONS_DIR)

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
      endpoint: '/api/alpha_service/chat_completion', streaming: false, confidential, status: 200, outcome: 'ok', errorCode: '', errorCause: '',
      bytes, requestLength: req.length, requestBytes: req.length, headLength: cut, responseBytes: response.length,
      chunkMarks: null, latencyMs: 12.5, ttfbMs: null, providerMs: 11, overheadMs: 0.25,
      detection: '{"a":"\\n"}', issues: '[]',
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
