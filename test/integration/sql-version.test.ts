// The oldest ClickHouse server tracegate runs on: a server that answers as ClickHouse 18.16 is refused
// by `serve` before any migration, and `tracegate doctor` says so with the minimum version; 24.3 passes
// the check. The server here is a real HTTP server that answers every query with its version.
import t from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { rmSync } from 'node:fs'
import { Tracegate } from '../../src/tracegate.js'
import { tempDir, testConfig } from '../helpers/server.js'
import { cliEnv, runTracegate } from '../helpers/cli.js'
import { MIN_CLICKHOUSE_VERSION } from '../../src/domain/clickhouse-version.js'

/** A server that answers `SELECT version()` as ClickHouse `version` and refuses every other query. */
async function fakeClickHouse (version: string): Promise<string> {
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => { body += c.toString() })
    req.on('end', () => {
      const query = new URL(req.url ?? '/', 'http://x').searchParams.get('query') ?? body
      if (/version\(\)/.test(query)) {
        res.writeHead(200, { 'content-type': 'text/plain', 'x-clickhouse-format': 'JSONEachRow' }).end(`${JSON.stringify({ version, v: version })}\n`)
        return
      }
      res.writeHead(500, { 'x-clickhouse-exception-code': '50' }).end('Code: 50. DB::Exception: Unknown data type family: DateTime64. (UNKNOWN_TYPE)\n')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { server.close(() => { resolve() }); server.closeAllConnections() }))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

const dir = tempDir()
t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })

t.test('serve refuses a server older than the minimum, naming both versions', async (t) => {
  const url = await fakeClickHouse('18.16.1')
  await t.rejects(Tracegate.start(testConfig(dir, null, { CLICKHOUSE_URL: url }), { bootstrap: false }), {
    code: 'clickhouse_unavailable',
    message: new RegExp(`ClickHouse 18\\.16\\.1 is older than ${MIN_CLICKHOUSE_VERSION.replace('.', '\\.')}`),
  })
})

t.test('doctor says the server is too old, with the fix', async (t) => {
  const url = await fakeClickHouse('18.16.1')
  const r = await runTracegate(['doctor', '--json'], cliEnv(dir, { CLICKHOUSE_URL: url }))
  const body = JSON.parse(r.stdout.trim().split('\n').pop() ?? 'null') as { ok: boolean; checks: Array<{ id: string; ok: boolean; detail: string; fix: string | null }> }
  const ch = body.checks.find((c) => c.id === 'clickhouse')!
  t.equal(ch.ok, false)
  t.match(ch.detail, /18\.16\.1 is older than 24\.3/)
  t.equal(r.code, 1)
})

t.test('a server of the minimum version passes the check (and fails later, on this fake, at its first migration)', async (t) => {
  const url = await fakeClickHouse(`${MIN_CLICKHOUSE_VERSION}.1.1`)
  const err = await Tracegate.start(testConfig(dir, null, { CLICKHOUSE_URL: url }), { bootstrap: false }).then(async (tg) => { await tg.close(); return null }, (e: unknown) => e as Error)
  t.ok(err !== null, 'the fake cannot migrate')
  t.notMatch(err!.message, /older than/)
})
