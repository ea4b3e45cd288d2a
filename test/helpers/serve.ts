// A real `tracegate serve` process, the one way the tests start one: ServeChild spawns it with an
// environment, keeps what it writes (a person's text on stderr, the JSON log on stdout), waits for a line
// on stderr, stops it with SIGTERM, and ends it at teardown if the test left it running. startServe is
// the common case, `serve --mock-providers` on a new data directory with its proxy port and first proxy
// key read from stderr. Then the data directory opened as the next start would (its own store worker,
// which replays what the process left), and what it stored.
import { spawn, type ChildProcess } from 'node:child_process'
import type { Test } from 'tap'
import { loadConfig, type ClickHouseServerConfig } from '../../src/config.js'
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

const STOP_TIMEOUT_MS = 15_000

interface Tap {
  teardown (fn: () => unknown): void
}

export interface ServeChildOptions {
  /** `tracegate` and its arguments; default `serve --mock-providers`. */
  readonly args?: readonly string[]
  /** The whole environment (see cliEnv and childEnv). */
  readonly env: NodeJS.ProcessEnv
  /** At teardown a process still running gets SIGKILL (default), or SIGTERM and SIGKILL if it has not exited within 15 s. */
  readonly teardown?: 'kill' | 'term'
}

export type Exit = { code: number | null; signal: NodeJS.Signals | null }

export class ServeChild {
  readonly child: ChildProcess
  /** The JSON log so far. */
  stdout = ''
  /** What it said to a person so far (listening on, the first-start block, a fatal error). */
  stderr = ''
  exited = false
  /** Resolves when the process has exited. */
  readonly exit: Promise<Exit>
  readonly #waiters = new Set<() => boolean>()

  /** `t` ends the process at its teardown; with null the caller ends it. */
  constructor (t: Tap | null, o: ServeChildOptions) {
    const child = spawn(process.execPath, cliArgs(...(o.args ?? ['serve', '--mock-providers'])), { env: o.env, stdio: ['ignore', 'pipe', 'pipe'] })
    this.child = child
    child.stdout.setEncoding('utf8').on('data', (s: string) => { this.stdout += s })
    child.stderr.setEncoding('utf8').on('data', (s: string) => { this.stderr += s; this.#wake() })
    this.exit = new Promise((resolve) => {
      child.on('close', (code, signal) => {
        this.exited = true
        resolve({ code, signal })
        this.#wake()
      })
    })
    t?.teardown(async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      if (o.teardown === 'term') {
        child.kill('SIGTERM')
        if (await withTimeout(this.exit, STOP_TIMEOUT_MS, 'serve did not stop').then(() => true, () => false)) return
      }
      child.kill('SIGKILL')
      await this.exit
    })
  }

  #wake (): void {
    for (const check of this.#waiters) check()
  }

  /** Resolves with the first match of `pattern` in stderr; rejects if the process exits or time runs out. */
  waitFor (pattern: RegExp, ms = START_TIMEOUT_MS): Promise<RegExpExecArray> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        done()
        reject(new Error(`serve did not print ${String(pattern)} within ${ms} ms\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`))
      }, ms)
      const done = (): void => { clearTimeout(timer); this.#waiters.delete(check) }
      const check = (): boolean => {
        const m = pattern.exec(this.stderr)
        if (m !== null) { done(); resolve(m); return true }
        if (this.exited) {
          done()
          reject(new Error(`serve exited before printing ${String(pattern)}\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`))
          return true
        }
        return false
      }
      if (!check()) this.#waiters.add(check)
    })
  }

  /** SIGTERM, then the exit status (rejects when it takes longer than `ms`). */
  async stop (ms = STOP_TIMEOUT_MS): Promise<Exit> {
    this.child.kill('SIGTERM')
    return await withTimeout(this.exit, ms, `serve did not exit within ${ms} ms of SIGTERM`)
  }
}

/** The proxy's port as serve prints it on stderr. */
export const PROXY_LISTENING = /tracegate proxy listening on http:\/\/127\.0\.0\.1:(\d+)\n/
/** The first start's proxy key as serve prints it on stderr. */
export const FIRST_PROXY_KEY = /^ {2}proxy key: +(\S+)$/m

/** `serve --mock-providers` on `dataDir` (new: its first start), once its proxy listens; killed at teardown. */
export async function startServe (t: Test, dataDir: string, env: Record<string, string> = {}): Promise<ServeProcess> {
  const serve = new ServeChild(t, { env: cliEnv(dataDir, env) })
  const port = Number((await serve.waitFor(PROXY_LISTENING))[1])
  const key = (await serve.waitFor(FIRST_PROXY_KEY))[1]!
  return { child: serve.child, port, key, exit: serve.exit, stderr: () => serve.stderr }
}

/**
 * A store worker on the data directory, as `serve` starts it (chDB: one data directory per test process;
 * or `clickhouse`, a server); resolves once its trace writer has replayed and inserted what it found on disk.
 */
export async function reopenedStore (t: Test, dataDir: string, clickhouse: ClickHouseServerConfig | null = null): Promise<{ store: StoreClient; stats: TraceStats }> {
  const store = new StoreClient({ dataDir, clickhouse, traces: loadConfig({}).traces, pricingFile: null, testSeams: true })
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
