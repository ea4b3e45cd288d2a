// Child processes of the tests: `tracegate` itself (bin's entry, src/cli) and the fixtures that run as
// processes. From source the entry is a .ts file, which node runs only with the TypeScript loader tap
// started this process with (in execArgv, not NODE_OPTIONS), so the child gets the same flags.
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'
import { request } from 'undici'
import { adminFile } from '../../src/admin/server.js'
import { COMPILED, moduleFile } from '../../src/paths.js'

export const CLI = fileURLToPath(moduleFile('../../src/cli.js', import.meta.url))

/** The caller's environment without its own tracegate or ClickHouse settings, plus `env`. */
export function childEnv (env: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = {}
  for (const [name, value] of Object.entries(process.env)) {
    // Nothing from the caller's own tracegate or ClickHouse set-up may leak into these processes.
    if (!name.startsWith('TRACEGATE_') && !name.startsWith('CLICKHOUSE_')) base[name] = value
  }
  return { ...base, ...env }
}

/** childEnv for a `tracegate` on `dataDir` with any free ports and warnings only, plus `extra`. */
export function cliEnv (dataDir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return childEnv({ TRACEGATE_DATA_DIR: dataDir, TRACEGATE_PROXY_PORT: '0', TRACEGATE_DASHBOARD_PORT: '0', TRACEGATE_LOG_LEVEL: 'warn', ...extra })
}

/** The arguments for `node <file> ...args` (spawn process.execPath with them), with the TypeScript loader when running from source. */
export function nodeArgs (file: string, ...args: string[]): string[] {
  return [...(COMPILED ? [] : process.execArgv), file, ...args]
}

/** The arguments for `tracegate ...args` (spawn process.execPath with them). */
export function cliArgs (...args: string[]): string[] {
  return nodeArgs(CLI, ...args)
}

export interface CliRun {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs `tracegate ...args` to its end with `env` (see childEnv) and `stdin` (then closed); killed and
 * rejected after `timeoutMs`.
 */
export function runTracegate (args: readonly string[], env: NodeJS.ProcessEnv, stdin = '', timeoutMs = 30_000): Promise<CliRun> {
  const child = spawn(process.execPath, cliArgs(...args), { env, stdio: ['pipe', 'pipe', 'pipe'] })
  const out: Buffer[] = []
  const err: Buffer[] = []
  child.stdout.on('data', (b: Buffer) => { out.push(b) })
  child.stderr.on('data', (b: Buffer) => { err.push(b) })
  // A command that exits without reading its stdin must not fail with EPIPE.
  child.stdin.on('error', () => {})
  child.stdin.end(stdin)
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`tracegate ${args.join(' ')}: still running after ${timeoutMs} ms\n${Buffer.concat(err).toString('utf8')}`))
    }, timeoutMs)
    child.once('error', (e) => { clearTimeout(timer); reject(e) })
    child.once('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') })
    })
  })
}

/** The one JSON line a successful `--json` command prints, parsed. */
export function oneJson (t: Test, r: CliRun, what: string): any {
  t.equal(r.code, 0, `${what} exits 0 (stderr: ${r.stderr.trim()})`)
  const lines = r.stdout.split('\n').filter((l) => l.trim() !== '')
  t.equal(lines.length, 1, `${what} prints one line`)
  return JSON.parse(lines[0] ?? 'null')
}

/** A command the CLI refused: exit 1, nothing on stdout, a `tracegate:` message on stderr. */
export function refused (t: Test, r: CliRun, what: string): void {
  t.equal(r.code, 1, `${what}: exit 1`)
  t.equal(r.stdout, '', `${what}: nothing on stdout`)
  t.match(r.stderr, /^tracegate: \S/, `${what}: a message on stderr`)
}

/** One operation on the admin socket of the server running on `dataDir`, as the CLI sends it; the error object on a refusal. */
export async function adminCall (dataDir: string, op: string, args: Record<string, unknown>): Promise<{ status: number; value?: any; error?: { code: string; param: string | null } }> {
  const endpoint = JSON.parse(readFileSync(adminFile(dataDir), 'utf8')) as { port: number; token: string }
  const r = await request(`http://127.0.0.1:${endpoint.port}/admin/${op}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${endpoint.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(args),
  })
  return { status: r.statusCode, ...await r.body.json() as object }
}
