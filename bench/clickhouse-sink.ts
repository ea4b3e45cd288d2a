// A ClickHouse server for the remote-path benchmark that does no ClickHouse work for traces: inserts into
// `traces` are read to their end (gunzipped when sent compressed), counted and discarded. Everything
// else (SELECT version(), the migrations' DDL and bookkeeping, accounts and keys, the limiter's usage
// at start) goes to chDB in this process, answered as a server would, so tracegate starts, finds its
// first key and serves; none of that scales with calls. Not a product feature: the way of
// test/fixtures/clickhouse-standin.ts, with the trace inserts cut out.
// Run as its own process, so its CPU is not tracegate's: `node clickhouse-sink.js DATA_DIR`; it prints
// "listening PORT". GET /sink-stats answers the counts as JSON.
import { createServer, type IncomingMessage } from 'node:http'
import type { Readable } from 'node:stream'
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib'
import { Session } from 'chdb'
import { answerError, runQuery } from '../test/fixtures/clickhouse-http.js'

const dir = process.argv[2]
if (dir === undefined) throw new Error('usage: clickhouse-sink DATA_DIR')
const session = new Session(dir)

/** What the trace inserts brought: wire bytes as sent, bytes and rows once decoded. */
const stats = { inserts: 0, rows: 0, wireBytes: 0, bytes: 0, compressedInserts: 0, refused: 0 }

const TRACES_INSERT = /^\s*INSERT\s+INTO\s+traces\b/i

/** The request body as sent, decoded as ClickHouse decodes a Content-Encoding it accepts. */
function decoded (req: IncomingMessage): Readable {
  const enc = req.headers['content-encoding']
  if (enc === undefined || enc === 'identity') return req
  const d = enc === 'gzip' ? createGunzip() : enc === 'deflate' ? createInflate() : enc === 'br' ? createBrotliDecompress() : null
  if (d === null) throw new Error(`Code: 48. DB::Exception: Unknown Content-Encoding: ${enc}`)
  req.on('error', (err) => d.destroy(err))
  return req.pipe(d)
}

async function readAll (body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const c of body) chunks.push(c as Buffer)
  return Buffer.concat(chunks)
}

/**
 * A trace insert read to its end: TabSeparated escapes line breaks inside values, so each 0x0A ends a
 * row. Counted only once the body has ended, as a server commits the insert only then.
 */
async function swallow (req: IncomingMessage): Promise<void> {
  const body = decoded(req)
  let wire = 0
  if (body !== req) req.on('data', (c: Buffer) => { wire += c.length })
  let bytes = 0
  let rows = 0
  for await (const c of body) {
    const b = c as Buffer
    bytes += b.length
    for (let i = b.indexOf(10); i !== -1; i = b.indexOf(10, i + 1)) rows++
  }
  stats.inserts++
  stats.rows += rows
  stats.wireBytes += body === req ? bytes : wire
  stats.bytes += bytes
  if (body !== req) stats.compressedInserts++
}

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://sink')
  if (url.pathname === '/ping') {
    res.end('Ok.\n')
    return
  }
  if (url.pathname === '/sink-stats') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(stats))
    return
  }
  const query = url.searchParams.get('query')
  if (query !== null && TRACES_INSERT.test(query)) {
    swallow(req).then(() => {
      res.writeHead(200, { 'content-type': 'text/plain; charset=UTF-8', 'x-clickhouse-summary': '{}' }).end()
    }, (err: unknown) => {
      stats.refused++
      answerError(res, err)
    })
    return
  }
  let body: Readable
  try {
    body = decoded(req)
  } catch (err) {
    answerError(res, err)
    return
  }
  readAll(body).then((b) => runQuery(session, url, b)).then((out) => {
    res.writeHead(200, { 'content-type': 'text/plain; charset=UTF-8', 'x-clickhouse-server-display-name': 'sink' })
    res.end(out)
  }, (err: unknown) => { answerError(res, err) })
})
server.listen(0, '127.0.0.1', () => {
  const addr = server.address()
  process.stdout.write(`listening ${typeof addr === 'object' && addr !== null ? addr.port : 0}\n`)
})
