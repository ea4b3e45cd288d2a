// A real `tracegate serve --mock-providers` process on a data directory, for the tests that need the
// whole process (a kill, its files): started, its proxy port and first proxy key read from what it tells
// standard error, and killed at teardown if the test left it running.
import { spawn, type ChildProcess } from 'node:child_process'
import type { Test } from 'tap'
import { cliArgs, cliEnv } from './cli.js'
import { withTimeout } from './wait.js'

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
