// Child processes for the benchmarks: the mock provider, tracegate in front of it, and nginx when it is
// installed. Each is a real process on loopback that the benchmark stops when it ends. Also what the
// benchmarks share: the chat they send, its request bodies, and BENCH_SKIP.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import type { Pool } from 'undici'

/** The cases BENCH_SKIP (a comma list) leaves out. */
export const skipped: ReadonlySet<string> = new Set((process.env.BENCH_SKIP ?? '').split(',').filter(Boolean))

/** The chat every proxy benchmark sends: a system prompt and a 580-character user message. */
export const MESSAGES = [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: 'Write a haiku about proxies. '.repeat(20) }]

/** MESSAGES, or with `n` in front of the user message (a new message every request). */
function chat (n: number | null): typeof MESSAGES {
  return n === null ? MESSAGES : [MESSAGES[0]!, { role: 'user', content: `${n} ${MESSAGES[1]!.content}` }]
}

/** The model the chat asks for unless a deployment's BENCH_MODEL says otherwise. */
const MODEL = 'gpt-4o-mini'

/** The provider's request body for the chat (what tracegate forwards, or what a direct call sends). */
export function providerBody (stream: boolean, n: number | null = null, model = MODEL): string {
  return JSON.stringify({ model, messages: chat(n), stream, temperature: 0.7 })
}

/** Whose provider key and model a tracegate body carries: the mock's by default; a null key leaves the account's server-side one. */
export interface BodyFor { readonly providerKey: string | null; readonly model: string }
const MOCK: BodyFor = { providerKey: 'sk-bench', model: MODEL }

/** tracegate's request body for the chat: the provider's, with the tracegate key and a provider key. */
export function proxyBody (key: string, stream: boolean, n: number | null = null, to: BodyFor = MOCK): string {
  return JSON.stringify({ api_key: key, ...(to.providerKey === null ? {} : { alpha_api_key: to.providerKey }), model: to.model, messages: chat(n), stream, temperature: 0.7 })
}

export const CLI = fileURLToPath(new URL('../src/cli.js', import.meta.url))

export interface Proc {
  readonly child: ChildProcess
  readonly output: string[]
  stop (): Promise<void>
}

/**
 * Spawns and resolves once stdout has printed every pattern; returns their first capture groups. The child
 * gets this process's environment (its TRACEGATE_* settings too) with `env` over it.
 */
export function spawnUntil (cmd: string, args: string[], env: Record<string, string>, patterns: RegExp[], timeoutMs = 60_000): Promise<{ proc: Proc; matches: string[] }> {
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  const output: string[] = []
  const proc: Proc = {
    child,
    output,
    stop: () => new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) { resolve(); return }
      child.once('exit', () => { resolve() })
      child.kill('SIGTERM')
      setTimeout(() => child.kill('SIGKILL'), 15_000).unref()
    }),
  }
  return new Promise((resolve, reject) => {
    const matches: Array<string | undefined> = patterns.map(() => undefined)
    let text = ''
    const timer = setTimeout(() => { reject(new Error(`${cmd} ${args.join(' ')} did not start:\n${text}`)) }, timeoutMs)
    const onData = (b: Buffer): void => {
      const s = b.toString('utf8')
      output.push(s)
      text += s
      patterns.forEach((p, i) => { matches[i] ??= p.exec(text)?.[1] })
      if (matches.every((m) => m !== undefined)) {
        clearTimeout(timer)
        resolve({ proc, matches: matches as string[] })
      }
    }
    // serve says where it listens on stderr (its stdout is the JSON log); the mock provider on stdout.
    child.stdout?.on('data', onData)
    child.stderr?.on('data', onData)
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`${cmd} exited with ${code}:\n${text}`)) })
  })
}

/** `cpus`: the cores the mock runs on (taskset's list), or any when null. */
export async function startMock (args: string[] = [], cpus: string | null = null): Promise<{ proc: Proc; url: string }> {
  const { proc, matches } = await spawnUntil(...pinned(cpus, process.execPath, [CLI, 'mock-provider', '--port', '0', ...args]), {}, [/mock provider listening on (http:\/\/\S+)/])
  return { proc, url: matches[0]! }
}

export interface TracegateProc {
  readonly proc: Proc
  readonly url: string
  readonly pid: number
  readonly key: string
  /** The first-start account, which owns `key`. */
  readonly accountId: string
  readonly dataDir: string
  stop (): Promise<void>
}

/** Extra node flags for the tracegate process only, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`. */
const TRACEGATE_NODE_ARGS = (process.env.BENCH_TRACEGATE_NODE_ARGS ?? '').split(' ').filter(Boolean)

/** The command and arguments that run `cmd` on the cores `cpus` lists (taskset's `0-3,6`), or anywhere when null. */
function pinned (cpus: string | null, cmd: string, args: string[]): [string, string[]] {
  return cpus === null ? [cmd, args] : ['taskset', ['-c', cpus, cmd, ...args]]
}

/**
 * `cli`: another build's src/cli.js (a baseline to compare with), by default this one. `cpus`: the cores it
 * runs on (taskset keeps the pid: the process is tracegate's).
 */
export async function startTracegate (mockUrl: string, env: Record<string, string> = {}, cli: string = CLI, cpus: string | null = null): Promise<TracegateProc> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tracegate-bench-'))
  const { proc, matches } = await spawnUntil(...pinned(cpus, process.execPath, [...TRACEGATE_NODE_ARGS, cli, 'serve']), {
    TRACEGATE_DATA_DIR: dataDir,
    TRACEGATE_PROXY_PORT: '0',
    TRACEGATE_DASHBOARD_PORT: '0',
    TRACEGATE_LOG_LEVEL: 'warn',
    TRACEGATE_ALPHA_BASE_URL: mockUrl,
    TRACEGATE_BETA_BASE_URL: mockUrl,
    TRACEGATE_GAMMA_BASE_URL: mockUrl,
    ...env,
  }, [/proxy listening on (http:\/\/\S+)/, /proxy key: (tgk_\S+)/, /account: +(\S+)/])
  return {
    proc,
    url: matches[0]!,
    key: matches[1]!,
    accountId: matches[2]!,
    dataDir,
    pid: proc.child.pid!,
    stop: async () => {
      await proc.stop()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

export function freePort (): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port
      srv.close(() => { resolve(port) })
    })
  })
}

const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => existsSync(p)) ?? null

/**
 * nginx `proxy_pass` in front of the mock, or null when nginx is not installed. By default one worker (like
 * tracegate's one front thread) on any core; `cpus`: the cores its master and workers run on.
 */
export async function startNginx (mockUrl: string, opts: { workers?: number; cpus?: string | null } = {}): Promise<{ url: string; pid: number; stop (): Promise<void> } | null> {
  if (NGINX === null) return null
  const dir = mkdtempSync(join(tmpdir(), 'tracegate-bench-nginx-'))
  const port = await freePort()
  const upstream = new URL(mockUrl).host
  writeFileSync(join(dir, 'nginx.conf'), `
worker_processes ${opts.workers ?? 1};
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream mock { server ${upstream}; keepalive 256; }
  server {
    listen 127.0.0.1:${port} reuseport;
    client_max_body_size 4m;
    location / {
      proxy_pass http://mock;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`)
  const child = spawn(...pinned(opts.cpus ?? null, NGINX, ['-p', dir, '-c', join(dir, 'nginx.conf')]), { stdio: 'ignore' })
  // nginx has no ready line: wait for its pid file.
  for (let i = 0; i < 100 && !existsSync(join(dir, 'nginx.pid')); i++) await new Promise((r) => setTimeout(r, 50))
  const pid = Number(readFileSync(join(dir, 'nginx.pid'), 'utf8'))
  return {
    url: `http://127.0.0.1:${port}`,
    pid,
    stop: () => new Promise((resolve) => {
      child.once('exit', () => { rmSync(dir, { recursive: true, force: true }); resolve() })
      child.kill('SIGQUIT')
    }),
  }
}

/** Resident memory of a process in bytes, from /proc. */
/** x to two decimals, as the bench lines print figures. */
export const round2 = (x: number): number => Math.round(x * 100) / 100

/** The value at position ⌊q × n⌋ of xs sorted (NaN when empty). */
export function quantile (xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN
}

export function rssOf (pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m === null ? 0 : Number(m[1]) * 1024
}

/** CPU time (user + system) in µs from a /proc stat file (clock ticks of 10 ms). */
function statCpuUs (file: string): number {
  const stat = readFileSync(file, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10_000
}

/** CPU time a process has used, all its threads, in µs. */
export function processCpuUs (pid: number): number {
  return statCpuUs(`/proc/${pid}/stat`)
}

/** CPU time of a process's main thread alone (tracegate's proxy thread), in µs. */
export function mainThreadCpuUs (pid: number): number {
  return statCpuUs(`/proc/${pid}/task/${pid}/stat`)
}

/** One load run of an on/off comparison: throughput, failures, and the server's own CPU per request. */
export interface PairedRun { readonly rps: number; readonly errors: number; readonly cpuUsPerRequest: number }

/**
 * `runs` pairs of runs, off then on, alternating so drift in the machine's speed falls on both alike; and
 * the fields every on/off benchmark prints (means, the ratio overall and per pair, CPU per request).
 */
export async function alternate<R extends PairedRun> (runs: number, off: () => Promise<R>, on: () => Promise<R>): Promise<{ offRuns: R[]; onRuns: R[]; summary: Record<string, number | number[]> }> {
  const offRuns: R[] = []
  const onRuns: R[] = []
  for (let i = 0; i < runs; i++) {
    offRuns.push(await off())
    onRuns.push(await on())
  }
  const mean = (rs: R[], f: (r: R) => number): number => rs.reduce((s, r) => s + f(r), 0) / rs.length
  const rpsOff = mean(offRuns, (r) => r.rps)
  const rpsOn = mean(onRuns, (r) => r.rps)
  return {
    offRuns,
    onRuns,
    summary: {
      rps_off: Math.round(rpsOff),
      rps_on: Math.round(rpsOn),
      ratio: Math.round((rpsOn / rpsOff) * 1000) / 1000,
      ratio_runs: onRuns.map((r, i) => Math.round((r.rps / offRuns[i]!.rps) * 1000) / 1000),
      // The server's own CPU per request (all its threads, from /proc), read without the noise of the
      // load generator and the mock sharing the cores.
      cpu_us_per_request_off: Math.round(mean(offRuns, (r) => r.cpuUsPerRequest)),
      cpu_us_per_request_on: Math.round(mean(onRuns, (r) => r.cpuUsPerRequest)),
      errors: offRuns.concat(onRuns).reduce((s, r) => s + r.errors, 0),
    },
  }
}

/** Runs a tracegate CLI command against a running server's data directory (through its admin socket); its JSON answer. */
export function tracegateCli (tg: TracegateProc, args: string[]): unknown {
  const out = execFileSync(process.execPath, [CLI, ...args, '--json'], { env: { ...process.env, TRACEGATE_DATA_DIR: tg.dataDir }, encoding: 'utf8' })
  return JSON.parse(out)
}

export interface RateRun { readonly calls: number; readonly errors: number; readonly hits: number; readonly p50: number; readonly p99: number; readonly max: number }

/**
 * `rate` calls a second for `seconds` over `pool`, each timed from its send to its last byte; the schedule
 * does not wait for answers (an open loop). `body` null: a GET; a function: the body of the call it is
 * given the number of (0, 1, …). `hits`: answers saying x-tracegate-cache: hit. `into`: each call's time is
 * also added there (a caller merging several runs).
 */
export async function fixedRate (pool: Pool, rate: number, path: string, body: string | null | ((n: number) => string), headers: Record<string, string>, seconds: number, into: number[] | null = null): Promise<RateRun> {
  const ms: number[] = []
  let errors = 0
  let hits = 0
  const pending: Array<Promise<void>> = []
  const one = async (n: number): Promise<void> => {
    const t0 = performance.now()
    try {
      const r = body === null
        ? await pool.request({ path, method: 'GET' })
        : await pool.request({ path, method: 'POST', body: typeof body === 'string' ? body : body(n), headers: { 'content-type': 'application/json', ...headers } })
      await r.body.arrayBuffer()
      const took = performance.now() - t0
      ms.push(took)
      into?.push(took)
      if (r.statusCode !== 200) errors++
      if (r.headers['x-tracegate-cache'] === 'hit') hits++
    } catch {
      errors++
    }
  }
  const start = performance.now()
  const total = Math.round(rate * seconds)
  let sent = 0
  while (sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate))
    for (; sent < due; sent++) pending.push(one(sent))
    await new Promise<void>((resolve) => setTimeout(resolve, 1))
  }
  await Promise.all(pending)
  return { calls: ms.length, errors, hits, p50: round2(quantile(ms, 0.5)), p99: round2(quantile(ms, 0.99)), max: round2(Math.max(...ms)) }
}

/** Where a load bench sends its calls: a tracegate it started in front of the mock, or a deployment's. */
export interface BenchTarget {
  /** The proxy's base URL. */
  readonly url: string
  /** The body of the chat call (the contract route's, with the tracegate key and, when there is one, the provider key). */
  body (stream: boolean): string
  /** The tracegate key the calls carry. */
  readonly key: string
  /** The provider key the calls carry, or null: the account's server-side key is used. */
  readonly providerKey: string | null
  /** The model the calls ask for. */
  readonly model: string
  /** `/metrics` and its token, or null when the deployment's were not given (lag and accounting are then skipped). */
  readonly metrics: { readonly url: string; readonly token: string | null } | null
  /** True when the bench started it (loopback, the mock behind it). */
  readonly local: boolean
  stop (): Promise<void>
}

/**
 * BENCH_URL and BENCH_KEY aim a load bench at an existing deployment (its proxy URL and a tracegate key;
 * BENCH_PROVIDER_KEY a provider key, else the account's server-side key; BENCH_MODEL, default gpt-4o-mini;
 * BENCH_METRICS_URL and BENCH_METRICS_TOKEN its /metrics). Its calls go to the provider behind it: they
 * cost what real calls cost, so the bench's `load` settings (how long, how fast) must be set, not taken
 * from defaults sized for the mock; without them it stops before any call. Without BENCH_URL, the bench
 * starts the mock and a tracegate (`env` for it).
 */
export async function benchTarget (env: Record<string, string> = {}, load: readonly string[] = []): Promise<BenchTarget> {
  const url = process.env.BENCH_URL ?? ''
  if (url !== '') {
    const unset = load.filter((name) => process.env[name] === undefined)
    if (unset.length > 0) {
      say(`a deployment needs ${unset.join(', ')} set: every call reaches its provider, and the defaults are sized for the mock`)
      process.exit(2)
    }
    const key = process.env.BENCH_KEY ?? ''
    if (key === '') throw new Error('BENCH_URL needs BENCH_KEY: a tracegate key of the deployment')
    const providerKey = process.env.BENCH_PROVIDER_KEY ?? ''
    const model = process.env.BENCH_MODEL ?? MODEL
    const metricsUrl = process.env.BENCH_METRICS_URL ?? ''
    const to: BodyFor = { providerKey: providerKey === '' ? null : providerKey, model }
    return {
      url: url.replace(/\/+$/, ''),
      body: (stream) => proxyBody(key, stream, null, to),
      key,
      ...to,
      metrics: metricsUrl === '' ? null : { url: metricsUrl, token: process.env.BENCH_METRICS_TOKEN ?? null },
      local: false,
      stop: async () => {},
    }
  }
  const mock = await startMock()
  const metricsPort = await freePort()
  const tg = await startTracegate(mock.url, { ...env, TRACEGATE_METRICS_PORT: String(metricsPort) })
  return {
    url: tg.url,
    body: (stream) => proxyBody(tg.key, stream),
    key: tg.key,
    ...MOCK,
    metrics: { url: `http://127.0.0.1:${metricsPort}/metrics`, token: null },
    local: true,
    stop: async () => {
      await tg.stop()
      await mock.proc.stop()
    },
  }
}

/** One sample of a Prometheus text (`name` with its labels as written), or null when absent. */
export function sampleOf (text: string, name: string): number | null {
  const m = new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)
  return m === null ? null : Number(m[1])
}

/** The line a person reads, after the JSON lines (on standard error, so the JSON on standard output stays JSON). */
export function say (text: string): void {
  process.stderr.write(text + '\n')
}

/** A count as people's lines write it: 12,345. */
export const thousands = (n: number): string => n.toLocaleString('en-US')
