// Shared by the fault suite: a tracegate whose log lines are kept, load that counts its 200s, a watcher
// that checks /healthz answers throughout a fault, and the accounting every fault test ends with:
// 200 responses = rows written + rows still spooled + rows counted as dropped.
import type { Test } from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { MockProvider } from '../../src/mock-provider/index.js'
import type { TraceStats } from '../../src/store/trace-types.js'
import type { Tracegate } from '../../src/tracegate.js'
import { startTracegate as startOn } from '../helpers/server.js'
import { capturingLogger, type Logs } from '../helpers/logs.js'
import { type RawResponse, send } from '../helpers/http.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { sleep, until, withTimeout } from '../helpers/wait.js'

export interface Running {
  readonly tg: Tracegate
  readonly logs: Logs
  readonly url: string
  readonly accountId: string
  readonly key: string
}

/** A tracegate on `dataDir` with the test seams and a kept log, an account and a proxy key; closed at teardown. */
export async function startTracegate (t: Test, dataDir: string, mock: MockProvider | null, env: Record<string, string> = {}): Promise<Running> {
  const logs = capturingLogger()
  const started = await startOn(t, dataDir, mock, { TRACEGATE_KEY_CACHE_TTL_MS: '600000', ...env }, { testSeams: true, log: logs.log })
  return { ...started, logs }
}

/** The trace stats after a flush; `callMs` bounds the store's answer. */
export async function stats (tg: Tracegate, callMs = 15_000): Promise<TraceStats> {
  const s = await withTimeout(tg.store.call('flushTraces'), callMs, 'flushTraces')
  if (s === null) throw new Error('tracing is off')
  return s
}

/** Polls the trace stats until `done` holds; returns the last stats or throws with them. */
export async function statsUntil (tg: Tracegate, what: string, done: (s: TraceStats) => boolean, ms = 30_000, callMs = 15_000): Promise<TraceStats> {
  let last: TraceStats | null = null
  return await until(async () => {
    last = await stats(tg, callMs)
    return done(last) ? last : undefined
  }, { ms, everyMs: 100, what: () => `${what}: trace stats ${JSON.stringify(last)}` })
}

/** Rows of the account in ClickHouse, and distinct trace ids among them. */
export async function storedRows (tg: Tracegate, accountId: string): Promise<{ rows: number; unique: number }> {
  const r = await withTimeout(tg.store.call('testQuery', {
    query: 'SELECT count() AS n, uniqExact(trace_id) AS u FROM traces WHERE account_id = {a:UUID}',
    params: { a: accountId },
  }), 15_000, 'count query')
  return { rows: Number(r[0]?.n ?? 0), unique: Number(r[0]?.u ?? 0) }
}

export function chat (r: Running): Promise<RawResponse> {
  return send(r.url + ROUTES.alpha, { body: JSON.stringify(bodyFor('alpha', { api_key: r.key })) })
}

/** Requests `concurrency` at a time until `stop()` says so (or `max` were sent); counts answers by status. */
export async function loadUntil (r: Running, stop: () => boolean, concurrency = 8, max = 5_000): Promise<Map<number, number>> {
  const statuses = new Map<number, number>()
  let sent = 0
  const worker = async (): Promise<void> => {
    while (!stop() && sent < max) {
      sent++
      const res = await chat(r)
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  return statuses
}

/** Polls GET /healthz every 100 ms until stopped; resolves with the answers that were not 200. */
export function watchHealth (url: string): { stop (): Promise<string[]> } {
  const bad: string[] = []
  let running = true
  const loop = (async () => {
    while (running) {
      try {
        const res = await withTimeout(fetch(url + '/healthz'), 2_000, 'healthz')
        if (res.status !== 200) bad.push(`status ${res.status}`)
        await res.arrayBuffer()
      } catch (err) {
        bad.push((err as Error).message)
      }
      await sleep(100)
    }
  })()
  return { async stop () { running = false; await loop; return bad } }
}

export async function readyz (url: string): Promise<{ status: number; reason: string | null }> {
  const res = await fetch(url + '/readyz')
  const body = await res.json() as { error?: { code?: string; reason?: string } }
  if (res.status !== 200) {
    if (body.error?.code !== 'service_unavailable') throw new Error(`/readyz answered ${res.status} with ${JSON.stringify(body)}`)
  }
  return { status: res.status, reason: body.error?.reason ?? null }
}

/** Rows of the account waiting in the spool on disk (each file's first line lists its rows). */
export function spooledRows (dataDir: string, accountId: string): number {
  const dir = join(dataDir, 'spool')
  let names: string[] = []
  try { names = readdirSync(dir).filter((n) => n.endsWith('.tsv')) } catch { return 0 }
  let n = 0
  for (const name of names) {
    const rows = JSON.parse(readFileSync(join(dir, name), 'utf8').split('\n', 1)[0]!) as Array<{ account_id: string }>
    n += rows.filter((row) => row.account_id === accountId).length
  }
  return n
}

/**
 * The check every fault ends with: every 200 is a row written, a row still in the spool, or a counted
 * drop (the server is this scenario's own, so its counters are too). Nothing may still wait in memory.
 */
export async function accounted (t: Test, r: Running, dataDir: string, ok200: number, what: string): Promise<TraceStats> {
  const s = await stats(r.tg)
  const stored = await storedRows(r.tg, r.accountId)
  const spooled = spooledRows(dataDir, r.accountId)
  t.equal(stored.unique, stored.rows, `${what}: no trace stored twice`)
  t.equal(s.queued, 0, `${what}: nothing left waiting in memory`)
  t.equal(stored.rows + spooled + s.dropped, ok200,
    `${what}: 200 responses (${ok200}) = rows written (${stored.rows}) + rows in the spool (${spooled}) + rows dropped (${s.dropped})`)
  return s
}
