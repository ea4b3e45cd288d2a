// The tests' ClickHouse server stand-in (test/fixtures/clickhouse-standin.ts) in its own process on a fresh
// data directory, stopped and removed at teardown.
import { spawn, type ChildProcess } from 'node:child_process'
import { rmSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'
import { moduleFile } from '../../src/paths.js'
import { nodeArgs } from './cli.js'
import { tempDir } from './server.js'

const STANDIN = fileURLToPath(moduleFile('../fixtures/clickhouse-standin.js', import.meta.url))

export interface StandIn {
  readonly port: number
  /** Kills it (SIGKILL, as a crash would) and waits for its exit; also run at teardown. */
  stop (): Promise<void>
}

/** The stand-in on `dir` (kept at teardown: the caller's), listening on `port` (0: any free one). */
export async function spawnStandIn (t: Test, dir: string, port = 0): Promise<StandIn> {
  const child: ChildProcess = spawn(process.execPath, nodeArgs(STANDIN, String(port), dir), { stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = new Promise<void>((resolve) => { child.once('exit', () => { resolve() }) })
  const stop = async (): Promise<void> => { if (child.exitCode === null && child.signalCode === null) { child.kill('SIGKILL'); await exited } }
  t.teardown(stop)
  const bound = await new Promise<number>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString('utf8')
      const m = /listening (\d+)/.exec(out)
      if (m !== null) resolve(Number(m[1]))
    })
    child.once('exit', (code) => { reject(new Error(`the stand-in exited (${String(code)}) before listening`)) })
  })
  return { port: bound, stop }
}

/** The stand-in on a fresh data directory, removed at teardown; its URL. */
export async function startStandIn (t: Test): Promise<string> {
  const dir = tempDir('tracegate-standin-')
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  return `http://127.0.0.1:${(await spawnStandIn(t, dir)).port}`
}
