// A real redis-server for a test (Debian's, with a password and no persistence), on a free port and in a
// folder of its own, stopped at teardown. Missing redis-server is a failure: CI installs it (.ci/run).
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { closedPort } from './server.js'
import { withTimeout } from './wait.js'

export const REDIS_SERVER = '/usr/bin/redis-server'
export const PASSWORD = 's3cr@t-pw'

export interface Tap {
  teardown (fn: () => unknown): void
}

function requireRedis (): void {
  if (!existsSync(REDIS_SERVER)) throw new Error(`${REDIS_SERVER} is missing: install Debian's redis-server (apt-get install redis-server)`)
}


export interface RedisProcess {
  stop (): Promise<void>
}

/** redis-server on `port` (which redis cannot pick itself), ready when it says so; stopped at teardown. */
export async function startRedis (t: Tap, port: number, dir: string): Promise<RedisProcess> {
  const child: ChildProcess = spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
    '--requirepass', PASSWORD, '--dir', dir], { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  const exited = new Promise<void>((resolve) => { child.on('exit', () => { resolve() }) })
  const ready = new Promise<void>((resolve, reject) => {
    const read = (s: string): void => {
      output += s
      if (output.includes('Ready to accept connections')) resolve()
    }
    child.stdout!.setEncoding('utf8').on('data', read)
    child.stderr!.setEncoding('utf8').on('data', read)
    child.on('exit', (code) => { reject(new Error(`redis-server exited with ${code}:\n${output}`)) })
  })
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill('SIGTERM')
    await withTimeout(exited, 5_000, 'redis-server did not stop').catch(() => { child.kill('SIGKILL') })
  }
  t.teardown(stop)
  await withTimeout(ready, 10_000, `redis-server on port ${port}`)
  return { stop }
}

/** A redis-server of its own, in a folder of its own, for one test. */
export async function freshRedis (t: Tap): Promise<{ port: number; dir: string; redis: RedisProcess }> {
  requireRedis()
  const dir = mkdtempSync(join(tmpdir(), 'tracegate-redis-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const port = await closedPort()
  return { port, dir, redis: await startRedis(t, port, dir) }
}


/** The URL of a fresh redis-server, with its password. */
export async function redisUrl (t: Tap): Promise<string> {
  const { port } = await freshRedis(t)
  return `redis://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${port}`
}
