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

/** The stand-in's URL. */
export async function startStandIn (t: Test): Promise<string> {
  const dir = tempDir('tracegate-standin-')
  const child: ChildProcess = spawn(process.execPath, nodeArgs(STANDIN, '0', dir), { stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = new Promise<void>((resolve) => { child.once('exit', () => { resolve() }) })
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) { child.kill('SIGKILL'); await exited }
    rmSync(dir, { recursive: true, force: true })
  })
  const port = await new Promise<number>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString('utf8')
      const m = /listening (\d+)/.exec(out)
      if (m !== null) resolve(Number(m[1]))
    })
    child.once('exit', (code) => { reject(new Error(`the stand-in exited (${String(code)}) before listening`)) })
  })
  return `http://127.0.0.1:${port}`
}
