// Trace inserts to a ClickHouse server (CLICKHOUSE_URL, the remote path): with
// CLICKHOUSE_COMPRESSION on they arrive brotli-compressed and decode to the TabSeparated rows of the calls
// made, which the server stores; off (the default) they arrive as plain TabSeparated. The server is the
// test stand-in (ClickHouse's HTTP interface over chDB, its own process, decoding Content-Encoding as
// ClickHouse does) behind a pass-through that keeps each trace insert as it was sent.
import t, { type Test } from 'tap'
import { rmSync } from 'node:fs'
import { createServer, request, type OutgoingHttpHeaders } from 'node:http'
import { brotliDecompressSync } from 'node:zlib'
import { startMockProvider } from '../../src/mock-provider/index.js'
import { TRACE_COLUMNS } from '../../src/store/worker/rows.js'
import { Tracegate } from '../../src/tracegate.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { startStandIn } from '../helpers/clickhouse-standin.js'
import { send } from '../helpers/http.js'
import { tempDir, testConfig } from '../helpers/server.js'
import { until } from '../helpers/wait.js'

interface Insert { readonly encoding: string | undefined; readonly body: Buffer }

/** A pass-through to the server on `port` that keeps every trace insert's Content-Encoding and body. */
async function recorder (t: Test, port: number): Promise<{ url: string; inserts: Insert[] }> {
  const inserts: Insert[] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => { chunks.push(c) })
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      const query = new URL(req.url ?? '/', 'http://recorder').searchParams.get('query') ?? ''
      if (/^INSERT INTO traces\b/.test(query)) inserts.push({ encoding: req.headers['content-encoding'], body })
      const headers: OutgoingHttpHeaders = { ...req.headers, 'content-length': body.length }
      delete headers['transfer-encoding']
      const up = request({ host: '127.0.0.1', port, method: req.method, path: req.url, headers }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers)
        r.pipe(res)
      })
      up.on('error', (err) => { res.writeHead(502).end(err.message) })
      up.end(body)
    })
  })
  await new Promise<void>((resolve) => { server.listen(0, '127.0.0.1', resolve) })
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => { resolve() }) }))
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, inserts }
}

/** tracegate on the stand-in (through the recorder) with `env`; `calls` chats made; what the inserts carried. */
async function traced (t: Test, env: Record<string, string>, calls: number): Promise<{ ids: string[]; inserts: Insert[]; tg: Tracegate }> {
  const rec = await recorder(t, Number(new URL(await startStandIn(t)).port))
  const mock = await startMockProvider({ recordLimit: 0 })
  t.teardown(() => mock.close())
  const dataDir = tempDir('tracegate-remote-')
  t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })
  const tg = await Tracegate.start(testConfig(dataDir, mock, { CLICKHOUSE_URL: rec.url, TRACEGATE_TRACE_FLUSH_MS: '100', ...env }), { bootstrap: false, testSeams: true })
  t.teardown(() => tg.close())
  const account = await tg.admin.createAccount({ name: 'remote', plan: 'pro' })
  const { key } = await tg.admin.createKey({ account: account.id, scope: 'proxy' })
  const ids: string[] = []
  for (let i = 0; i < calls; i++) {
    const r = await send(`http://127.0.0.1:${tg.proxyPort}${ROUTES.alpha}`, { body: JSON.stringify(bodyFor('alpha', { api_key: key }, `call ${i}\twith a tab`)) })
    t.equal(r.status, 200, `call ${i} answered`)
    ids.push(r.requestId)
  }
  // The front thread hands traces over every few ms: flushed until all of them are written.
  const stats = await until(async () => {
    const s = await tg.store.call('flushTraces')
    return s !== null && s.written >= calls ? s : undefined
  }, { ms: 15_000, everyMs: 50, what: 'every trace written' })
  t.equal(stats.spooled, 0, 'no batch was refused')
  return { ids, inserts: rec.inserts, tg }
}

/** The rows of decoded insert bodies, each split into its fields (TabSeparated escapes tabs and line breaks in values). */
function rowsOf (bodies: Buffer[]): string[][] {
  return bodies.flatMap((b) => b.toString('utf8').split('\n').filter((l) => l !== '').map((l) => l.split('\t')))
}

async function storedCount (tg: Tracegate, ids: string[]): Promise<number> {
  const r = await tg.store.call('testQuery', { query: 'SELECT count() AS n FROM traces WHERE has({ids:Array(UUID)}, trace_id)', params: { ids } })
  return Number(r[0]?.n ?? 0)
}

const TRACE_ID = TRACE_COLUMNS.indexOf('trace_id')

t.test('CLICKHOUSE_COMPRESSION=on: trace inserts are brotli-compressed and decode to the rows of the calls made', async (t) => {
  const { ids, inserts, tg } = await traced(t, { CLICKHOUSE_COMPRESSION: 'on' }, 3)
  t.ok(inserts.length > 0, `${inserts.length} trace inserts`)
  t.same([...new Set(inserts.map((i) => i.encoding))], ['br'], 'every one with content-encoding br')
  const rows = rowsOf(inserts.map((i) => brotliDecompressSync(i.body)))
  t.same(rows.map((r) => r[TRACE_ID]).sort(), [...ids].sort(), 'the bodies decode to one row per call, by trace id')
  t.ok(rows.every((r) => r.length === TRACE_COLUMNS.length), `each row has the ${TRACE_COLUMNS.length} columns`)
  t.ok(rows.some((r) => r.some((f) => f.includes('call 0\\\\twith a tab'))), 'the prompt travels escaped as TabSeparated')
  t.ok(inserts.reduce((s, i) => s + i.body.length, 0) < rows.reduce((s, r) => s + r.join('\t').length + 1, 0), 'fewer bytes than the rows')
  t.equal(await storedCount(tg, ids), ids.length, 'the server decoded and stored every row')
})

t.test('off (the default): trace inserts are plain TabSeparated', async (t) => {
  const { ids, inserts, tg } = await traced(t, {}, 2)
  t.ok(inserts.length > 0, `${inserts.length} trace inserts`)
  t.same(inserts.filter((i) => i.encoding !== undefined), [], 'none has a content-encoding')
  const rows = rowsOf(inserts.map((i) => i.body))
  t.same(rows.map((r) => r[TRACE_ID]).sort(), [...ids].sort(), 'one row per call, by trace id')
  t.equal(await storedCount(tg, ids), ids.length, 'the server stored every row')
})
