// How an admin command reaches the store: through the running server's local admin socket when one
// holds the data directory, or by opening the store itself when none does.
import { readFileSync } from 'node:fs'
import { request } from 'undici'
import type { Config } from '../config.js'
import { isErrorCode, TracegateError } from '../errors.js'
import { adminFile, type AdminEndpoint } from './server.js'
import { StoreClient } from '../store/client.js'
import { AdminOps, type AdminStatus } from './ops.js'
import { recordPasswordReset } from '../password-resets.js'
import { privateDataDir } from '../paths.js'

export type Op = 'migrate' | 'account.create' | 'account.update' | 'user.create' | 'key.create' | 'key.revoke' | 'key.update' | 'key.list' | 'account.list' | 'user.reset-password' | 'status'

function readEndpoint (dataDir: string): AdminEndpoint | null {
  try {
    return JSON.parse(readFileSync(adminFile(dataDir), 'utf8')) as AdminEndpoint
  } catch {
    return null
  }
}

function processAlive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

async function viaServer (endpoint: AdminEndpoint, op: Op, args: Record<string, unknown>): Promise<unknown> {
  const res = await request(`http://127.0.0.1:${endpoint.port}/admin/${op}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${endpoint.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(args),
  })
  const body = await res.body.json() as { value?: unknown; error?: { code: string; message: string } }
  if (body.error !== undefined) {
    throw new TracegateError(isErrorCode(body.error.code) ? body.error.code : 'internal_error', { message: body.error.message })
  }
  return body.value
}

async function direct (config: Config, op: Op, args: Record<string, unknown>): Promise<unknown> {
  // Files it makes (the embedded ClickHouse's) are private as a server's are.
  privateDataDir(config.dataDir)
  // The CLI never writes traces: a spool left by a server is replayed by the next server.
  const store = new StoreClient({ dataDir: config.dataDir, clickhouse: config.clickhouse, traces: { ...config.traces, enabled: false }, pricingFile: null })
  try {
    // No dashboard runs: the reset is written where the next one reads it when it starts.
    const ops = new AdminOps(store, undefined, (userId) => { recordPasswordReset(config.dataDir, userId) })
    // The doctor reports pending migrations; it does not apply them.
    if (op === 'status') return await ops.status()
    const applied = await ops.migrate()
    switch (op) {
      case 'migrate': return applied
      case 'account.create': return await ops.createAccount(args)
      case 'user.create': return await ops.createUser(args)
      case 'key.create': return await ops.createKey(args)
      case 'key.revoke': return await ops.revokeKey(args)
      case 'key.update': return await ops.updateKey(args)
      case 'account.update': return await ops.updateAccount(args)
      case 'key.list': return await ops.listKeys(args)
      case 'account.list': return await ops.listAccounts()
      case 'user.reset-password': return await ops.resetPassword(args)
    }
  } finally {
    await store.close()
  }
}

/** The answer of the server running on the data directory, or null when none runs there. */
async function fromServer (config: Config, op: Op, args: Record<string, unknown>): Promise<{ readonly value: unknown } | null> {
  const endpoint = readEndpoint(config.dataDir)
  if (endpoint === null || !processAlive(endpoint.pid)) return null
  try {
    return { value: await viaServer(endpoint, op, args) }
  } catch (err) {
    // A server that died without removing its file: the caller opens the store.
    const code = (err as { code?: string }).code
    if (code !== 'ECONNREFUSED' && code !== 'UND_ERR_SOCKET') throw err
    return null
  }
}

export async function runAdmin (config: Config, op: Op, args: Record<string, unknown>): Promise<unknown> {
  const answer = await fromServer(config, op, args)
  return answer !== null ? answer.value : await direct(config, op, args)
}

/** The store's status for the doctor, and whether a running server gave it (then that server holds the data directory). */
export async function adminStatus (config: Config): Promise<{ readonly status: AdminStatus; readonly server: boolean }> {
  const answer = await fromServer(config, 'status', {})
  if (answer !== null) return { status: answer.value as AdminStatus, server: true }
  return { status: await direct(config, 'status', {}) as AdminStatus, server: false }
}
