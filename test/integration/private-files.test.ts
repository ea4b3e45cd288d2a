// Prompts stay private to tracegate's user: a real `tracegate serve` started by a
// parent whose umask lets others read (022) makes a fresh data directory, takes calls that are written
// ahead and waiting for their insert, and every file under the data directory (write-ahead segments,
// the embedded ClickHouse's parts, the dashboard's secret) is then 0600 at most and every folder 0700 at
// most. A data directory an earlier version made 0755 is narrowed to 0700 by the next start.
import t from 'tap'
import { chmodSync, lstatSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { send } from '../helpers/http.js'
import { startServe } from '../helpers/serve.js'
import { tempDir } from '../helpers/server.js'
import { until } from '../helpers/wait.js'

const root = tempDir('tracegate-private-')
t.teardown(() => { rmSync(root, { recursive: true, force: true }) })
// The children inherit it: without tracegate's own umask their files would be 0644 and folders 0755.
const before = process.umask(0o022)
t.teardown(() => { process.umask(before) })

/** Every path under `dir` whose permissions let anyone but the owner in, with its mode. */
function openToOthers (dir: string): string[] {
  const out: string[] = []
  const walk = (d: string): void => {
    for (const name of readdirSync(d)) {
      const p = join(d, name)
      const st = lstatSync(p)
      if (st.isSymbolicLink()) continue
      if ((st.mode & 0o077) !== 0) out.push(`${p.slice(dir.length)} ${(st.mode & 0o777).toString(8)}`)
      if (st.isDirectory()) walk(p)
    }
  }
  walk(dir)
  return out
}

function count (dir: string): number {
  let n = 0
  for (const name of readdirSync(dir)) {
    const p = join(dir, name)
    n++
    if (lstatSync(p).isDirectory()) n += count(p)
  }
  return n
}

t.test('a fresh data directory: every file 0600 and every folder 0700', async (t) => {
  const dataDir = join(root, 'fresh')
  const serve = await startServe(t, dataDir, { TRACEGATE_TRACE_FLUSH_MS: '60000' })
  for (let i = 0; i < 3; i++) {
    const body = bodyFor('alpha', { api_key: serve.key, alpha_api_key: 'sk-x', model: 'gpt-4o-mini' }, `private ${i}`)
    const r = await send(`http://127.0.0.1:${serve.port}${ROUTES.alpha}`, { body: JSON.stringify(body) })
    t.equal(r.status, 200, `call ${i} answered`)
  }
  // The rows wait for the flush interval in a write-ahead segment.
  await until(() => readdirSync(join(dataDir, 'spool')).some((f) => f.startsWith('wal-')), { ms: 10_000, everyMs: 50, what: 'a write-ahead segment' })
  t.equal(statSync(dataDir).mode & 0o777, 0o700, 'the data directory is 0700')
  t.ok(count(dataDir) > 20, `the walk sees the store's files (${count(dataDir)} entries)`)
  t.same(openToOthers(dataDir), [], 'nothing under it is open to other users')
  serve.child.kill('SIGTERM')
  const status = await serve.exit
  t.equal(status.code, 0, 'serve stopped cleanly')
  t.same(openToOthers(dataDir), [], 'nor after shutdown (the flushed parts)')
})

t.test('a data directory left open by an earlier version is narrowed at start', async (t) => {
  const dataDir = join(root, 'older')
  mkdirSync(dataDir, { mode: 0o755 })
  chmodSync(dataDir, 0o755)
  const serve = await startServe(t, dataDir)
  t.equal(statSync(dataDir).mode & 0o777, 0o700, 'the data directory is 0700 once serve runs')
  serve.child.kill('SIGTERM')
  await serve.exit
})
