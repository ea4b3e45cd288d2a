// Settings → API Keys and the account's limits: list, create (the value is in this one answer and nowhere
// after), revoke, and the limits of a key and of the account with their current use. Changes go through
// AdminOps, so the dashboard and the CLI refuse the same things, a revoked key leaves the proxy's key cache
// at once, and changed limits apply from the proxy's next call.
import type { AdminOps } from '../admin/ops.js'
import { keyView, limitsView, type KeyView, type LimitsView } from '../admin/views.js'
import { TracegateError } from '../errors.js'
import type { Limiter, LimitUsage } from '../limits/limiter.js'
import { parseLimitsPatch } from '../limits/types.js'
import type { StoreClient } from '../store/client.js'
import type { Guards } from './guards.js'
import type { Reply, Req } from './http.js'
import { UUID } from './params.js'
import type { Limits } from '../domain/limits.js'
import { SCOPES, type Scope } from '../domain/scope.js'
import type { KeyRow } from '../domain/accounts.js'

/** The use counted against each limit in its current window: requests and tokens this minute, USD this UTC day and month. */
export interface UseView {
  readonly rpm: number
  readonly tpm: number
  readonly budget_day: number
  readonly budget_month: number
  /** When each window ends, epoch ms. */
  readonly resets_at: { readonly minute: number; readonly day: number; readonly month: number }
}

export function useView (u: LimitUsage): UseView {
  return {
    rpm: u.minuteRequests,
    tpm: u.minuteTokens,
    budget_day: u.dayUsd,
    budget_month: u.monthUsd,
    resets_at: { minute: u.minuteResetMs, day: u.dayResetMs, month: u.monthResetMs },
  }
}

/** A key as Settings → API Keys lists it: the CLI's view and the use of each limit. */
export type KeyUseView = KeyView & { readonly use: UseView }

const MAX_EXPIRY_DAYS = 3650

/** The limit members of a request body, in the order a form shows them. */
const LIMIT_FIELDS = ['rpm', 'tpm', 'budget_day', 'budget_month', 'models', 'max_body_bytes'] as const
type LimitInput = Partial<Record<typeof LIMIT_FIELDS[number], unknown>>

/**
 * The limit members of `body`, checked with the rules of the CLI (limits/types.ts) but answered as the UI
 * API's 400 invalid_parameter naming the member. Only the JSON spellings count: `budget-day` is no member here.
 */
function limitInput (body: Record<string, unknown>, forAccount: boolean): LimitInput {
  const input: LimitInput = {}
  for (const f of LIMIT_FIELDS) if (Object.hasOwn(body, f)) input[f] = body[f]
  parseLimitsPatch(input, { forAccount, code: 'invalid_parameter' })
  return input
}

/**
 * An update's body: limit members only (a misspelt member is refused, not ignored) and at least one of them;
 * absent = unchanged, null or '' = removed.
 */
function limitUpdate (body: Record<string, unknown>, forAccount: boolean): LimitInput {
  for (const name of Object.keys(body)) {
    if (!(LIMIT_FIELDS as readonly string[]).includes(name)) {
      throw new TracegateError('invalid_parameter', { param: name, message: `${name} is not a limit; the limits are ${LIMIT_FIELDS.join(', ')}` })
    }
  }
  const input = limitInput(body, forAccount)
  if (Object.keys(input).length === 0) {
    throw new TracegateError('invalid_parameter', { message: `give at least one of ${LIMIT_FIELDS.filter((f) => !forAccount || f !== 'max_body_bytes').join(', ')}` })
  }
  return input
}

export class KeyRoutes {
  readonly #store: StoreClient
  readonly #admin: AdminOps
  readonly #guards: Guards
  readonly #limiter: Limiter

  constructor (store: StoreClient, admin: AdminOps, guards: Guards, limiter: Limiter) {
    this.#store = store
    this.#admin = admin
    this.#guards = guards
    this.#limiter = limiter
  }

  #view (k: KeyRow, lastUsed: string | null): KeyUseView {
    return { ...keyView(k, lastUsed), use: useView(this.#limiter.usage({ keyId: k.id })) }
  }

  list = async (req: Req): Promise<Reply> => {
    const c = await this.#guards.caller(req, false)
    const keys = await this.#admin.listKeys({ account: c.accountId })
    return { status: 200, body: { keys: keys.map((k) => this.#view(k, k.last_used_at)) } }
  }

  create = async (req: Req): Promise<Reply> => {
    const c = await this.#guards.caller(req, true)
    const body = req.body as Record<string, unknown>
    const name = body.name ?? ''
    if (typeof name !== 'string' || name.length > 200) throw new TracegateError('invalid_parameter', { param: 'name' })
    if (typeof body.scope !== 'string' || !SCOPES.includes(body.scope as Scope)) throw new TracegateError('invalid_parameter', { param: 'scope' })
    const days = body.expires_in_days ?? null
    if (days !== null && (typeof days !== 'number' || !Number.isInteger(days) || days < 1 || days > MAX_EXPIRY_DAYS)) {
      throw new TracegateError('invalid_parameter', { param: 'expires_in_days' })
    }
    const limits = limitInput(body, false)
    const created = await this.#admin.createKey({
      account: c.accountId, scope: body.scope, name, ...(days === null ? {} : { expiresIn: `${days}d` }), ...limits,
    })
    return { status: 201, body: { key: { ...this.#view(created, null), key: created.key } } }
  }

  /** The caller's account's key with that id and its last use; another account's id is as unknown as a made-up one. */
  async #ownKey (accountId: string, rawId: string): Promise<{ id: string; lastUsed: string | null }> {
    const id = rawId.toLowerCase()
    if (!UUID.test(id)) throw new TracegateError('key_not_found')
    const [keys, used] = await Promise.all([
      this.#store.call('listKeys', { accountId }),
      this.#store.call('keysLastUsed', { accountId }),
    ])
    if (!keys.some((k) => k.id === id)) throw new TracegateError('key_not_found')
    return { id, lastUsed: used.find((u) => u.key_id === id)?.last_used_at ?? null }
  }

  revoke = async (req: Req): Promise<Reply> => {
    const c = await this.#guards.caller(req, true)
    const own = await this.#ownKey(c.accountId, req.params[0] ?? '')
    const revoked = await this.#admin.revokeKey({ id: own.id })
    return { status: 200, body: { key: this.#view(revoked, own.lastUsed) } }
  }

  /** A change of one key's limits; the key cache drops the account's keys, so the next proxied call sees it. */
  updateLimits = async (req: Req): Promise<Reply> => {
    const c = await this.#guards.caller(req, true)
    const input = limitUpdate(req.body as Record<string, unknown>, false)
    const own = await this.#ownKey(c.accountId, req.params[0] ?? '')
    const row = await this.#admin.updateKey({ id: own.id, ...input })
    return { status: 200, body: { key: this.#view(row, own.lastUsed) } }
  }

  /** The account's limits (binding all its keys together), their use, and whether this user may change them. */
  accountLimits = async (req: Req): Promise<Reply> => {
    const c = await this.#guards.caller(req, false)
    return { status: 200, body: this.#accountBody(c.accountId, c.account.limits, c.admin) }
  }

  /** Admins only: the account's limits cap every key, so a member must not be able to lift them. */
  updateAccountLimits = async (req: Req): Promise<Reply> => {
    const c = await this.#guards.admin(req, 'change its limits')
    const input = limitUpdate(req.body as Record<string, unknown>, true)
    const row = await this.#admin.updateAccount({ id: c.accountId, ...input })
    return { status: 200, body: this.#accountBody(c.accountId, row.limits, true) }
  }

  #accountBody (accountId: string, limits: Limits, editable: boolean): { limits: LimitsView; use: UseView; editable: boolean } {
    return { limits: limitsView(limits, true), use: useView(this.#limiter.usage({ accountId })), editable }
  }
}
