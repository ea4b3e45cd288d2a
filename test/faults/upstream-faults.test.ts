// Upstream failures (hardening issue, item 4). A provider key or passed-on header that cannot travel in a
// header is the client's mistake, answered 422 naming it and never sent (it was 500 provider_unreachable).
// Every 5xx tracegate makes itself, and every stream it has to cut, is logged once with its cause, and
// the trace stores that cause: connect refused, reset, TLS, timeout, a provider that drops mid-stream.
import t, { type Test } from 'tap'
import { createServer as createTcpServer, type Server } from 'node:net'
import { createServer as createHttpServer } from 'node:http'
import { rmSync } from 'node:fs'
import { startMockProvider } from '../../src/mock-provider/index.js'
import { closedPort, tempDir } from '../helpers/server.js'
import { json, send } from '../helpers/http.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { sleep, withTimeout } from '../helpers/wait.js'
import { startTracegate, stats, type Running } from './fault-helpers.js'

const dataDir = tempDir('tracegate-upstream-faults-')
t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })
const mock = await startMockProvider()
t.teardown(() => mock.close())

async function listening (srv: Server | ReturnType<typeof createHttpServer>): Promise<number> {
  await new Promise<void>((resolve) => { srv.listen(0, '127.0.0.1', resolve) })
  const addr = srv.address()
  if (addr === null || typeof addr === 'string') throw new Error('no port')
  return addr.port
}


interface Stored { error_code: string; error_cause: string; outcome: string; status: number }

/** The stored trace, once it is written (the front thread hands finished calls over in batches). */
async function stored (r: Running, traceId: string): Promise<Stored | undefined> {
  const deadline = Date.now() + 10_000
  for (;;) {
    await stats(r.tg)
    const rows = await withTimeout(r.tg.store.call('testQuery', {
      query: 'SELECT error_code, error_cause, outcome, status FROM traces WHERE account_id = {a:UUID} AND trace_id = {id:UUID}',
      params: { a: r.accountId, id: traceId },
    }), 15_000, 'trace query')
    if (rows.length > 0 || Date.now() > deadline) return rows[0] as Stored | undefined
    await sleep(100)
  }
}

/** The log lines for one request id. */
function logged (r: Running, id: string): Array<Record<string, unknown>> {
  return r.logs.find('request failed').filter((l) => l.request_id === id)
}

async function expectCause (t: Test, r: Running, provider: keyof typeof ROUTES, fields: Record<string, unknown>,
  code: string, cause: RegExp): Promise<void> {
  const res = await send(r.url + ROUTES[provider], { body: JSON.stringify(bodyFor(provider, { api_key: r.key, ...fields })) })
  t.equal(res.status, 500, `${provider}: 500`)
  t.equal(json(res).error?.code, code, `${provider}: ${code}`)
  const id = String(res.headers['x-request-id'])
  const lines = logged(r, id)
  t.equal(lines.length, 1, `${provider}: logged once`)
  t.match(String(lines[0]?.cause), cause, `${provider}: the log names the cause (${String(lines[0]?.cause)})`)
  t.equal(lines[0]?.code, code, `${provider}: the log names the code`)
  const row = await stored(r, id)
  t.equal(row?.error_code, code, `${provider}: the trace has the code`)
  t.match(String(row?.error_cause), cause, `${provider}: the trace has the cause`)
}

t.test('unreachable providers: connect refused, reset, TLS, each logged once with its cause and stored on the trace', async (t) => {
  // Accepts and closes at once, with no answer.
  const resetter = createTcpServer((socket) => { socket.resetAndDestroy() })
  const resetPort = await listening(resetter)
  t.teardown(() => { resetter.close() })
  // Plain HTTP where TLS is expected.
  const plain = createHttpServer((_req, res) => { res.end('plain') })
  const plainPort = await listening(plain)
  t.teardown(() => { plain.close() })
  const r = await startTracegate(t, dataDir, null, {
    TRACEGATE_ALPHA_BASE_URL: `http://127.0.0.1:${await closedPort()}`,
    TRACEGATE_BETA_BASE_URL: `http://127.0.0.1:${resetPort}`,
    TRACEGATE_GAMMA_BASE_URL: `https://127.0.0.1:${plainPort}`,
  })
  await expectCause(t, r, 'alpha', {}, 'provider_unreachable', /^connect_refused: .*ECONNREFUSED/)
  await expectCause(t, r, 'beta', {}, 'provider_unreachable', /^(reset|socket_closed): /)
  await expectCause(t, r, 'gamma', {}, 'provider_unreachable', /^tls: /)
  const all = r.logs.find('request failed').map((l) => JSON.stringify(l))
  t.notOk(all.some((l) => l.includes(r.key) || l.includes('sk-client') || l.includes('AIza-client')), 'no key in any log line')
  await r.tg.close()
})

t.test('a timeout and a stream cut mid-way are logged with their cause', async (t) => {
  const r = await startTracegate(t, dataDir, mock, { TRACEGATE_UPSTREAM_HEADERS_TIMEOUT_MS: '300' })
  await expectCause(t, r, 'alpha', { model: 'gpt-4o-mini-hang' }, 'provider_timeout', /^headers_timeout: /)
  const res = await send(r.url + ROUTES.alpha, { body: JSON.stringify(bodyFor('alpha', { api_key: r.key, model: 'gpt-4o-mini-drop-chunks-40', stream: true })) }).catch((err: unknown) => err as Error)
  // The client sees the cut (an error or a body without the end), never a clean end.
  const id = res instanceof Error ? null : String(res.headers['x-request-id'])
  const lines = r.logs.find('request failed').filter((l) => l.outcome === 'provider_stream_error')
  t.equal(lines.length, 1, 'the cut stream is logged once')
  t.match(String(lines[0]?.cause), /^(reset|socket_closed|error): /, `with its cause (${String(lines[0]?.cause)})`)
  const row = await stored(r, id ?? String(lines[0]?.request_id))
  t.equal(row?.outcome, 'provider_stream_error', 'the trace says the provider broke the stream')
  t.ok((row?.error_cause ?? '') !== '', 'and keeps its cause')
  await r.tg.close()
})

t.test('provider keys and passed-on headers that cannot travel in a header are 422, never sent', async (t) => {
  const r = await startTracegate(t, dataDir, mock)
  mock.reset()
  // As JSON text: the docs' own placeholder, NUL, DEL, a space, a lone surrogate, a line break.
  const values = ['"sk-…"', '"sk-\\u0000x"', '"sk-\\u007fx"', '"sk- x"', '"sk-\\ud800x"', '"sk-a\\nb"', '"sk-é"']
  for (const provider of ['alpha', 'beta', 'gamma'] as const) {
    const field = `${provider}_api_key`
    for (const value of values) {
      const body = JSON.stringify(bodyFor(provider, { api_key: r.key, [field]: 'PLACEHOLDER' })).replace('"PLACEHOLDER"', value)
      const res = await send(r.url + ROUTES[provider], { body })
      t.equal(res.status, 422, `${provider} ${value}: 422`)
      t.equal(json(res).error?.code, 'invalid_field', `${provider} ${value}: invalid_field`)
      t.equal(json(res).error?.param, field, `${provider} ${value}: param names ${field}`)
    }
  }
  // node:http sends header text as UTF-8. Not at the end of the value: uWS 20.30 trims bytes >= 0x80
  // from a value's end as if they were spaces, so 'org-é' would arrive as 'org-' (docs/deployment.md, the HTTP front end's limits).
  for (const value of ['org-\u00e9-x', 'org-\u00ff\u00fe-1']) {
    const header = await send(r.url + ROUTES.alpha, { body: JSON.stringify(bodyFor('alpha', { api_key: r.key })), headers: { 'openai-organization': value } })
    t.equal(header.status, 422, `a non-ASCII openai-organization header: 422 (${header.body.toString('utf8').slice(0, 120)})`)
    t.equal(json(header).error?.param, 'openai-organization', 'naming the header')
  }
  t.equal(mock.stats.received, 0, 'nothing reached the provider')
  t.equal(r.logs.find('request failed').length, 0, 'client mistakes are not logged as failures')
  const ok = await send(r.url + ROUTES.alpha, { body: JSON.stringify(bodyFor('alpha', { api_key: r.key, alpha_api_key: 'sk-proj-AZaz09_-.~+/=' })) })
  t.equal(ok.status, 200, 'a key of printable ASCII still goes through')
  await r.tg.close()
})
