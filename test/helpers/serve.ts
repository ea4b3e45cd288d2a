// A real `tracegate serve --mock-providers` process on a data directory, for the tests that need the
// whole process (a kill, its files): started, its proxy port and first proxy key read from what it tells
// standard error, and killed at teardown if the test left it running. Then the data directory opened as
// the next start would (its own store worker, which replays what the process left), and what it stored.
import { spawn, type ChildProcess } from 'node:child_process'
import type { Test } from 'tap'
import { loadConfig } from '../../src/config.js'
import { StoreClient } from '../../src/store/client.js'
import type { TraceStats } from '../../src/store/trace-types.js'
import { cliArgs, cliEnv } from './cli.js'
import { until, withTimeout } from './wait.js'

const START_TIMEOUT_MS = 30_000

export interface ServeProcess {
  readonly child: ChildProcess
  readonly port: number
  /** The first start's proxy key (the data directory must be new). */
  readonly key: string
  /** Resolves when the process has exited. */
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** What it wrote to standard error so far. */
  stderr (): string
}

export async function startServe (t: Test, dataDir: string, env: Record<string, string> = {}): Promise<ServeProcess> {
  const child = spawn(process.execPath, cliArgs('serve', '--mock-providers'), {
    env: cliEnv(dataDir, env),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('close', (code, signal) => { resolve({ code, signal }) })
  })
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await exit
    }
  })
  let stderr = ''
  child.stdout.resume()
  const started = new Promise<{ port: number; key: string }>((resolve, reject) => {
    child.stderr.setEncoding('utf8').on('data', (s: string) => {
      stderr += s
      const port = /tracegate proxy listening on http:\/\/127\.0\.0\.1:(\d+)\n/.exec(stderr)?.[1]
      const key = /^ {2}proxy key: +(\S+)$/m.exec(stderr)?.[1]
      if (port !== undefined && key !== undefined) resolve({ port: Number(port), key })
    })
    void exit.then(() => { reject(new Error(`serve exited before it was listening\nstderr:\n${stderr}`)) })
  })
  const { port, key } = await withTimeout(started, START_TIMEOUT_MS, `serve did not start within ${START_TIMEOUT_MS} ms\nstderr:\n${stderr}`)
  return { child, port, key, exit, stderr: () => stderr }
}

/**
 * A store worker on the data directory, as `serve` starts it (chDB: one data directory per test process);
 * resolves once its trace writer has replayed and inserted what it found on disk.
 */
export async function reopenedStore (t: Test, dataDir: string): Promise<{ store: StoreClient; stats: TraceStats }> {
  const store = new StoreClient({ dataDir, clickhouse: null, traces: loadConfig({}).traces, pricingFile: null, testSeams: true })
  t.teardown(() => store.close())
  // Any request opens the store; its trace writer replays the spool left on disk by itself.
  await withTimeout(store.call('ping'), 30_000, 'ping')
  let stats: TraceStats | null = null
  await until(async () => {
    stats = await store.call('flushTraces')
    return stats !== null && stats.spoolBytes === 0 && stats.queued === 0 && stats.clickhouseUp
  }, { ms: 30_000, everyMs: 50, what: 'the files left by the killed process are replayed' })
  return { store, stats: stats! }
}

/** Every stored trace id, the row count, and the calls usage_minute counts. */
export async function storedCounts (store: StoreClient): Promise<{ rows: number; unique: number; ids: Set<string>; requests: number }> {
  const ids = await store.call('testQuery', { query: 'SELECT toString(trace_id) AS id FROM traces' })
  const [agg] = await store.call('testQuery', { query: 'SELECT count() AS n, uniqExact(trace_id) AS u FROM traces' })
  const [usage] = await store.call('testQuery', { query: 'SELECT sum(requests) AS r FROM usage_minute' })
  return { rows: Number(agg!.n), unique: Number(agg!.u), ids: new Set(ids.map((r) => String(r.id))), requests: Number(usage!.r) }
}
