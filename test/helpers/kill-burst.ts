// The kill -9 burst (crash-burst*.test.ts): a real `tracegate serve --mock-providers` takes CLIENTS
// concurrent clients' calls, streamed and not, and gets SIGKILL once BEFORE_KILL were answered; the data
// directory is then opened as the next start would, and every call whose client saw the end of its 200
// must be stored once and counted once in usage_minute.
import type { Test } from 'tap'
import { readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { bodyFor, ROUTES } from './bodies.js'
import { send } from './http.js'
import { reopenedStore, startServe, storedCounts } from './serve.js'
import { tempDir } from './server.js'
import { until, withTimeout } from './wait.js'

const CLIENTS = 40
/** Answered calls before the kill: enough that calls finish in every millisecond around it. */
const BEFORE_KILL = 400

/** `env`: the serve's settings beyond its defaults (TRACEGATE_THREADS). */
export function killDuringBurst (t: Test, env: Record<string, string>): void {
  const dataDir = tempDir('tracegate-crash-burst-')
  t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })

  t.test(`SIGKILL during a burst${env.TRACEGATE_THREADS === undefined ? '' : ` (TRACEGATE_THREADS=${env.TRACEGATE_THREADS})`}: every call whose client saw its 200 end is stored once after the restart`, async (t) => {
    const serve = await startServe(t, dataDir, env)
    const url = `http://127.0.0.1:${serve.port}${ROUTES.alpha}`
    const answered: string[] = []
    let killed = false
    let cut = 0
    const client = async (c: number): Promise<void> => {
      for (let i = 0; !killed; i++) {
        const stream = (c + i) % 2 === 0
        const body = bodyFor('alpha', { api_key: serve.key, alpha_api_key: 'sk-x', model: 'gpt-4o-mini', ...(stream ? { stream: true } : {}) }, `burst ${c}.${i}`)
        try {
          const r = await send(url, { body: JSON.stringify(body) })
          if (r.status === 200 && r.complete) answered.push(r.requestId)
          else if (!killed) throw new Error(`call ${c}.${i} answered ${r.status}: ${r.text}`)
        } catch (err) {
          if (!killed) throw err
          cut++
        }
      }
    }
    const clients = Array.from({ length: CLIENTS }, (_, c) => client(c))
    await until(() => answered.length >= BEFORE_KILL, { ms: 60_000, everyMs: 1, what: () => `${BEFORE_KILL} calls answered (${answered.length})` })
    serve.child.kill('SIGKILL')
    killed = true
    await Promise.all(clients)
    const status = await withTimeout(serve.exit, 10_000, 'serve did not exit after SIGKILL')
    t.equal(status.signal, 'SIGKILL', 'the process was killed')
    t.ok(cut > 0, `the kill cut calls in flight (${cut})`)
    const left = readdirSync(join(dataDir, 'spool'))
    t.comment(`${answered.length} calls answered; left in the spool folder: ${left.join(', ') || 'nothing'}`)

    const { store, stats } = await reopenedStore(t, dataDir)
    const c = await storedCounts(store)
    const missing = answered.filter((id) => !c.ids.has(id))
    t.same(missing, [], `every answered call is stored (${answered.length} answered, ${c.rows} rows, ${stats.dropped} counted as dropped)`)
    t.equal(c.unique, c.rows, 'no trace twice')
    t.equal(c.requests, c.rows, 'usage_minute counts each stored call once')
    t.same(readdirSync(join(dataDir, 'spool')).filter((f) => f.endsWith('.wal') || f.startsWith('wal-')), [], 'no hand-off file or segment left')
    await store.close()
  })
}
