// How an admin command reaches the store: through the running server's local admin socket when one
// holds the data directory, or by opening the store itself when none does.
import { readFileSync } from 'node:fs'
import { request } from 'undici'
import type { Config } from '../config.js'
import { isErrorCode, TracegateError } from '../errors.js'
import { adminFile, type AdminEndpoint } from './server.js'
import { StoreClient } from '../store/client.js'
import { AdminOps } from './ops.js'

type Op = 'migrate' | 'account.create' | 'user.create' | 'key.create' | 'key.revoke' | 'key.list'

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
  // The CLI never writes traces: a spool left by a server is replayed by the next server.
  const store = new StoreClient({ dataDir: config.dataDir, clickhouse: config.clickhouse, traces: { ...config.traces, enabled: false }, pricingFile: null })
  try {
    const ops = new AdminOps(store)
    const applied = await ops.migrate()
    switch (op) {
      case 'migrate': return applied
      case 'account.create': return await ops.createAccount(args)
      case 'user.create': return await ops.createUser(args)
      case 'key.create': return await ops.createKey(args)
      case 'key.revoke': return await ops.revokeKey(args)
      case 'key.list': return await ops.listKeys(args)
    }
  } finally {
    await store.close()
  }
}

export async function runAdmin (config: Config, op: Op, args: Record<string, unknown>): Promise<unknown> {
  const endpoint = readEndpoint(config.dataDir)
  if (endpoint !== null && processAlive(endpoint.pid)) {
    try {
      return await viaServer(endpoint, op, args)
    } catch (err) {
      // A server that died without removing its file: fall through to opening the store.
      const code = (err as { code?: string }).code
      if (code !== 'ECONNREFUSED' && code !== 'UND_ERR_SOCKET') throw err
    }
  }
  return direct(config, op, args)
}
