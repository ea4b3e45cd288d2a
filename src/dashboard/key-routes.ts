// Settings → API Keys: list, create (the value is in this one answer and nowhere after), revoke. Creation
// and revocation go through AdminOps, so the dashboard and the CLI refuse the same things and a revoked
// key leaves the proxy's key cache at once.
import type { AdminOps } from '../admin/ops.js'
import { TracegateError } from '../errors.js'
import type { StoreClient } from '../store/client.js'
import { SCOPES, type KeyRow, type Scope } from '../store/protocol.js'
import type { Guards } from './guards.js'
import type { Reply, Req } from './http.js'
import { chEpoch, UUID } from './params.js'

export interface KeyView {
  readonly id: string
  readonly name: string
  readonly prefix: string
  readonly scope: Scope
  readonly created_at: string
  readonly expires_at: string | null
  readonly last_used_at: string | null
  readonly status: 'active' | 'expired' | 'revoked'
}

export function keyView (k: KeyRow, lastUsed: string | null, now = Date.now()): KeyView {
  const status = k.revoked_at !== null ? 'revoked' : k.expires_at !== null && chEpoch(k.expires_at) <= now ? 'expired' : 'active'
  return {
    id: k.id,
    name: k.name,
    prefix: k.prefix,
    scope: k.scope,
    created_at: k.created_at,
    expires_at: k.expires_at,
    last_used_at: lastUsed,
    status,
  }
}

const MAX_EXPIRY_DAYS = 3650

export class KeyRoutes {
  readonly #store: StoreClient
  readonly #admin: AdminOps
  readonly #guards: Guards

  constructor (store: StoreClient, admin: AdminOps, guards: Guards) {
    this.#store = store
    this.#admin = admin
    this.#guards = guards
  }

  list = async (req: Req): Promise<Reply> => {
    const s = this.#guards.session(req)
    const keys = await this.#admin.listKeys({ account: s.accountId })
    return { status: 200, body: { keys: keys.map((k) => keyView(k, k.last_used_at)) } }
  }

  create = async (req: Req): Promise<Reply> => {
    const s = this.#guards.change(req)
    const body = req.body as Record<string, unknown>
    const name = body.name ?? ''
    if (typeof name !== 'string' || name.length > 200) throw new TracegateError('invalid_parameter', { param: 'name' })
    if (typeof body.scope !== 'string' || !SCOPES.includes(body.scope as Scope)) throw new TracegateError('invalid_parameter', { param: 'scope' })
    const days = body.expires_in_days ?? null
    if (days !== null && (typeof days !== 'number' || !Number.isInteger(days) || days < 1 || days > MAX_EXPIRY_DAYS)) {
      throw new TracegateError('invalid_parameter', { param: 'expires_in_days' })
    }
    const created = await this.#admin.createKey({
      account: s.accountId, scope: body.scope, name, ...(days === null ? {} : { expiresIn: `${days}d` }),
    })
    return { status: 201, body: { key: { ...keyView(created, null), key: created.key } } }
  }

  revoke = async (req: Req): Promise<Reply> => {
    const s = this.#guards.change(req)
    const id = (req.params[0] ?? '').toLowerCase()
    if (!UUID.test(id)) throw new TracegateError('key_not_found')
    // Only a key of the caller's account: another account's id is as unknown as a made-up one.
    const [keys, used] = await Promise.all([
      this.#store.call('listKeys', { accountId: s.accountId }),
      this.#store.call('keysLastUsed', { accountId: s.accountId }),
    ])
    if (!keys.some((k) => k.id === id)) throw new TracegateError('key_not_found')
    const revoked = await this.#admin.revokeKey({ id })
    return { status: 200, body: { key: keyView(revoked, used.find((u) => u.key_id === id)?.last_used_at ?? null) } }
  }
}
