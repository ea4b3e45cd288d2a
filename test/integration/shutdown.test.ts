// Graceful shutdown under load: a real `tracegate serve --mock-providers`
// process gets SIGTERM while ten clients keep sending requests. /readyz says shutting_down at once, new
// calls are still served for TRACEGATE_SHUTDOWN_DELAY_MS, then it stops accepting, lets in-flight calls
// finish, flushes every trace and exits 0. Then the test opens its data directory and finds exactly one
// row per 200 response the clients received in full. With front threads, a second signal ends the delay.
// (A separate file from durability.test.ts: chDB allows one data directory per process, and this one
// opens the server's.)
import t, { type Test } from 'tap'
import { rmSync } from 'node:fs'
import { loadConfig } from '../../src/config.js'
import { StoreClient } from '../../src/store/client.js'
import { tempDir } from '../helpers/server.js'
import { startServe } from '../helpers/serve.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { send, type RawResponse } from '../helpers/http.js'
import { sleep, withTimeout } from '../helpers/wait.js'

const LOOPS = 10
const LOAD_BEFORE_SIGTERM_MS = 1_000
const DELAY_MS = 2_500
/** How late after the signal /readyz may still say ready, and how early the listener may close. */
const SLACK_MS = 400
const EXIT_TIMEOUT_MS = 20_000
const MODEL = 'mock-chunks-5-gap-20'

type Outcome =
  | { kind: 'ok'; id: string }
  | { kind: 'status'; status: number; id: string | null; complete: boolean; body: string }
  | { kind: 'error'; code: string }

/** One chat completion over a fresh connection; `ok` only for a 200 received in full. */
async function call (port: number, key: string, stream: boolean): Promise<Outcome> {
  const body = bodyFor('alpha', { api_key: key, alpha_api_key: 'sk-x', model: MODEL, ...(stream ? { stream: true } : {}) }, 'hi')
  let r: RawResponse
  try {
    r = await send(`http://127.0.0.1:${port}${ROUTES.alpha}`, { body: JSON.stringify(body), acceptCut: true })
  } catch (err) {
    return { kind: 'error', code: (err as NodeJS.ErrnoException).code ?? (err as Error).message }
  }
  const id = r.requestId === '' ? null : r.requestId
  let full = r.complete
  if (full && r.status === 200) {
    if (stream) full = /data: \[DONE\]\s*$/.test(r.text)
    else {
      try { full = (JSON.parse(r.text) as { object?: unknown }).object === 'chat.completion' } catch { full = false }
    }
  }
  if (r.status === 200 && full && id !== null) return { kind: 'ok', id }
  return { kind: 'status', status: r.status, id, complete: full, body: r.text.slice(0, 300) }
}

/** /readyz on a fresh connection: its status and reason, or the socket error. */
async function readyz (port: number): Promise<string> {
  try {
    const r = await send(`http://127.0.0.1:${port}/readyz`, { method: 'GET' })
    return r.status === 200 ? '200' : `${r.status} ${String(JSON.parse(r.text).error?.reason)}`
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? (err as Error).message
  }
}

t.test('SIGTERM under load: /readyz says shutting_down at once, calls are served through the delay, rows equal the 200 responses', async (t) => {
  const dataDir = tempDir('tracegate-shutdown-')
  t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })
  const { port, key, exit, child, stderr } = await startServe(t, dataDir, { TRACEGATE_SHUTDOWN_DELAY_MS: String(DELAY_MS) })
  t.equal(await readyz(port), '200', 'ready before the signal')

  const received: string[] = []
  const others: Outcome[] = []
  let sent = 0
  let signalAt = Infinity
  /** Calls begun after the signal (and its slack) that got their 200 in full. */
  let servedAfterSignal = 0
  const refusedAfterMs: number[] = []
  const loop = async (n: number): Promise<void> => {
    for (let i = 0; ; i++) {
      sent++
      const begun = performance.now()
      const o = await call(port, key, (n + i) % 2 === 0)
      if (o.kind === 'ok') {
        received.push(o.id)
        if (begun > signalAt + SLACK_MS) servedAfterSignal++
        continue
      }
      others.push(o)
      refusedAfterMs.push(performance.now() - signalAt)
      // The loop ends at the first refusal: connection refused or reset, or 503.
      return
    }
  }
  const loops = Promise.all(Array.from({ length: LOOPS }, (_, n) => loop(n)))
  await sleep(LOAD_BEFORE_SIGTERM_MS)
  const beforeSignal = received.length
  t.ok(beforeSignal > LOOPS, `the clients got ${beforeSignal} responses before SIGTERM`)
  t.same(others, [], 'nothing was refused before SIGTERM')
  signalAt = performance.now()
  child.kill('SIGTERM')
  const [first, soon] = [await readyz(port), await sleep(SLACK_MS).then(() => readyz(port))]
  t.ok([first, soon].includes('503 shutting_down'), `/readyz says 503 shutting_down at once (${first}, then ${soon})`)
  t.equal(soon, '503 shutting_down', 'and still does')
  await withTimeout(loops, EXIT_TIMEOUT_MS, 'the client loops did not end after SIGTERM')
  const status = await withTimeout(exit, EXIT_TIMEOUT_MS, `serve did not exit within ${EXIT_TIMEOUT_MS} ms of SIGTERM`)
  t.same(status, { code: 0, signal: null }, `serve exits 0 (stderr: ${stderr().trim().slice(0, 2000)})`)
  t.comment(`sent ${sent}, 200 in full ${received.length} (${received.length - beforeSignal} after SIGTERM, ${servedAfterSignal} of calls begun after it), refused ${refusedAfterMs.map((ms) => Math.round(ms)).join(', ')} ms after SIGTERM by ${JSON.stringify(others.map((o) => o.kind === 'error' ? o.code : o.kind === 'status' ? o.status : o.id))}`)
  t.ok(servedAfterSignal >= LOOPS, `new calls were served during the delay (${servedAfterSignal})`)
  t.ok(Math.min(...refusedAfterMs) >= DELAY_MS - SLACK_MS, `no call was refused before the delay ended (first after ${Math.round(Math.min(...refusedAfterMs))} ms)`)

  t.equal(others.length, LOOPS, 'every loop ended with a refusal')
  for (const o of others) {
    const ok = (o.kind === 'error' && ['ECONNREFUSED', 'ECONNRESET'].includes(o.code)) ||
      (o.kind === 'status' && o.status === 503 && o.complete)
    t.ok(ok, `a loop ended by a refusal, not a broken answer: ${JSON.stringify(o)}`)
  }
  t.equal(new Set(received).size, received.length, 'every 200 has its own x-request-id')

  const store = new StoreClient({ dataDir, clickhouse: null, traces: loadConfig({}).traces, pricingFile: null, testSeams: true })
  t.teardown(() => store.close())
  const count = await withTimeout(store.call('testQuery', { query: 'SELECT count() AS n FROM traces WHERE status = 200' }), 30_000, 'count query')
  t.equal(Number(count[0]?.n), received.length, `rows with status 200 = the ${received.length} 200 responses the clients received`)
  const rows = await withTimeout(store.call('testQuery', { query: 'SELECT toString(trace_id) AS id, status, outcome FROM traces' }), 30_000, 'ids query')
  const stored = new Set(rows.filter((r) => Number(r.status) === 200).map((r) => String(r.id)))
  t.same(received.filter((id) => !stored.has(id)), [], 'no trace id of a 200 response is missing')
  t.same(rows.filter((r) => Number(r.status) === 200 && r.outcome !== 'ok'), [], 'every status-200 row has outcome ok')
  const spool = await withTimeout(store.call('traceStats'), 30_000, 'traceStats')
  t.equal(spool?.spoolBytes, 0, 'nothing was left in the spool')
  await store.close()
})

t.test('with front threads: every thread serves through the delay and says shutting_down; a second signal ends the delay', async (t) => {
  const dataDir = tempDir('tracegate-shutdown-threads-')
  t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })
  const { port, key, exit, child, stderr } = await startServe(t, dataDir, { TRACEGATE_THREADS: '2', TRACEGATE_SHUTDOWN_DELAY_MS: '600000' })
  child.kill('SIGTERM')
  await sleep(SLACK_MS)
  // Fresh connections: the kernel spreads them between the two threads.
  const answers = await Promise.all(Array.from({ length: 8 }, () => readyz(port)))
  t.same(new Set(answers), new Set(['503 shutting_down']), `every /readyz says shutting_down (${answers.join(', ')})`)
  const calls = await Promise.all(Array.from({ length: 8 }, (_, i) => call(port, key, i % 2 === 0)))
  t.same(calls.filter((c) => c.kind !== 'ok'), [], 'every new call is served during the delay')
  const second = performance.now()
  child.kill('SIGINT')
  const status = await withTimeout(exit, EXIT_TIMEOUT_MS, `serve did not exit within ${EXIT_TIMEOUT_MS} ms of the second signal`)
  t.same(status, { code: 0, signal: null }, `serve exits 0 (stderr: ${stderr().trim().slice(0, 2000)})`)
  t.comment(`exited ${Math.round(performance.now() - second)} ms after the second signal`)
  t.equal(await readyz(port), 'ECONNREFUSED', 'nothing listens any more')
})
