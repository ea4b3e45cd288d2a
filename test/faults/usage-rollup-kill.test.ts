// SIGKILL at the one moment the burst test (crash-burst.test.ts) hits by chance: a batch's rows and its
// usage rollup are both in ClickHouse, and its write-ahead segment, marked inserted (`.in`), is still on
// disk. The next start replays that rollup; it must count the batch once in usage_minute. The moment is
// made exact here: `tracegate serve` stores in a ClickHouse server (the test stand-in) through a gateway
// of this test's that forwards every request and, once the stand-in has taken the first rollup insert,
// kills the process before the answer goes back.
import t from 'tap'
import { createServer, request, type IncomingMessage } from 'node:http'
import { readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { spawnStandIn } from '../helpers/clickhouse-standin.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { send } from '../helpers/http.js'
import { reopenedStore, startServe, storedCounts, type ServeProcess } from '../helpers/serve.js'
import { tempDir } from '../helpers/server.js'
import { withTimeout } from '../helpers/wait.js'

const CALLS = 20

async function body (m: IncomingMessage): Promise<Buffer> {
  const parts: Buffer[] = []
  for await (const c of m) parts.push(c as Buffer)
  return Buffer.concat(parts)
}

t.test('SIGKILL after a rollup insert, before its segment is removed: the restart counts the batch once', async (t) => {
  const chDir = tempDir('tracegate-standin-')
  const dataDir = tempDir('tracegate-rollup-kill-')
  t.teardown(() => { rmSync(chDir, { recursive: true, force: true }); rmSync(dataDir, { recursive: true, force: true }) })
  const ch = await spawnStandIn(t, chDir)

  let serve: ServeProcess | null = null
  /** The spool folder as the kill left it; null until the kill. */
  let leftAtKill: string[] | null = null
  const gateway = createServer((req, res) => {
    void (async () => {
      const sent = await body(req)
      const answer = await new Promise<{ status: number; headers: IncomingMessage['headers']; body: Buffer }>((resolve, reject) => {
        const up = request({ host: '127.0.0.1', port: ch.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
          body(r).then((b) => { resolve({ status: r.statusCode ?? 0, headers: r.headers, body: b }) }, reject)
        })
        up.once('error', reject)
        up.end(sent)
      })
      const query = new URL(req.url ?? '/', 'http://gateway').searchParams.get('query') ?? ''
      if (serve !== null && leftAtKill === null && answer.status === 200 && /^INSERT INTO usage_batches\b/.test(query)) {
        serve.child.kill('SIGKILL')
        await serve.exit
        leftAtKill = readdirSync(join(dataDir, 'spool'))
        res.destroy()
        return
      }
      res.writeHead(answer.status, answer.headers)
      res.end(answer.body)
    })().catch(() => { res.destroy() })
  })
  await new Promise<void>((resolve) => { gateway.listen(0, '127.0.0.1', resolve) })
  t.teardown(() => { gateway.close() })
  const addr = gateway.address()
  const gatewayPort = typeof addr === 'object' && addr !== null ? addr.port : 0

  // The first batch is the CALLS calls, inserted once they are all in (no flush by time before).
  serve = await startServe(t, dataDir, { CLICKHOUSE_URL: `http://127.0.0.1:${gatewayPort}`, TRACEGATE_TRACE_BATCH_ROWS: String(CALLS), TRACEGATE_TRACE_FLUSH_MS: '60000' })
  const url = `http://127.0.0.1:${serve.port}${ROUTES.alpha}`
  const calls = await Promise.allSettled(Array.from({ length: CALLS }, (_, i) =>
    send(url, { body: JSON.stringify(bodyFor('alpha', { api_key: serve!.key, alpha_api_key: 'sk-x', model: 'gpt-4o-mini' }, `call ${i}`)) })))
  const answered = calls.flatMap((c) => c.status === 'fulfilled' && c.value.status === 200 && c.value.complete ? [c.value.requestId] : [])
  const status = await withTimeout(serve.exit, 20_000, 'serve was not killed at its first rollup insert')
  t.equal(status.signal, 'SIGKILL', 'the process was killed')
  const left = leftAtKill ?? []
  t.equal(left.filter((f) => /^wal-.*\.in\.tsv$/.test(f)).length, 1, `the kill left a segment marked inserted (${left.join(', ')})`)

  const { store } = await reopenedStore(t, dataDir, { url: `http://127.0.0.1:${ch.port}`, username: 'default', password: '', database: 'default', compression: false })
  const c = await storedCounts(store)
  t.ok(c.rows >= CALLS, `the killed batch is stored (${c.rows} rows)`)
  t.same(answered.filter((id) => !c.ids.has(id)), [], `every answered call is stored (${answered.length} answered)`)
  t.equal(c.unique, c.rows, 'no trace twice')
  t.equal(c.requests, c.rows, `usage_minute counts each stored call once (${c.requests} requests)`)
  await store.close()
})
