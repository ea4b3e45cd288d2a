// Settings → API Keys and the account's limits: list, create (the value is in this one answer and nowhere
// after), revoke, and the limits of a key and of the account with their current use. Changes go through
// AdminOps, so the dashboard and the CLI refuse the same things, a revoked key leaves the proxy's key cache
// at once, and changed limits apply from the proxy's next call.
import type { AdminOps } from '../admin/ops.js'
import { TracegateError } from '../errors.js'
import type { Limiter, LimitUsage } from '../limits/limiter.js'
import { parseLimitsPatch } from '../limits/types.js'
import type { StoreClient } from '../store/client.js'
import type { Guards } from './guards.js'
import type { Reply, Req } from './http.js'
import { chEpoch, UUID } from './params.js'
import type { Limits } from '../domain/limits.js'
import { SCOPES, type Scope } from '../domain/scope.js'
import type { KeyRow } from '../domain/accounts.js'

/** Limits under the JSON members a create or an update takes, so what is read can be sent back. */
export interface LimitsView {
  readonly rpm: number | null
  readonly tpm: number | null
  readonly budget_day: number | null
  readonly budget_month: number | null
  readonly models: readonly string[] | null
  /** Keys only: an account has no body limit, and its view has no such member. */
  readonly max_body_bytes?: number | null
}

/** The use counted against each limit in its current window: requests and tokens this minute, USD this UTC day and month. */
export interface UseView {
  readonly rpm: number
  readonly tpm: number
  readonly budget_day: number
  readonly budget_month: number
  /** When each window ends, epoch ms. */
  readonly resets_at: { readonly minute: number; readonly day: number; readonly month: number }
}

export interface KeyView {
  readonly id: string
  readonly name: string
  readonly prefix: string
  readonly scope: Scope
  readonly created_at: string
  readonly expires_at: string | null
  readonly last_used_at: string | null
  readonly status: 'active' | 'expired' | 'revoked'
  readonly limits: LimitsView
  readonly use: UseView
}

export function limitsView (l: Limits, forAccount = false): LimitsView {
  const shared = { rpm: l.rpm, tpm: l.tpm, budget_day: l.budgetDayUsd, budget_month: l.budgetMonthUsd, models: l.models }
  return forAccount ? shared : { ...shared, max_body_bytes: l.maxBodyBytes }
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

export function keyView (k: KeyRow, lastUsed: string | null, use: LimitUsage, now = Date.now()): KeyView {
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
    limits: limitsView(k.limits),
    use: useView(use),
  }
}

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

  #use (keyId: string): LimitUsage {
    return this.#limiter.usage({ keyId })
  }

  list = async (req: Req): Promise<Reply> => {
    const s = this.#guards.session(req)
    const keys = await this.#admin.listKeys({ account: s.accountId })
    return { status: 200, body: { keys: keys.map((k) => keyView(k, k.last_used_at, this.#use(k.id))) } }
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
    const limits = limitInput(body, false)
    const created = await this.#admin.createKey({
      account: s.accountId, scope: body.scope, name, ...(days === null ? {} : { expiresIn: `${days}d` }), ...limits,
    })
    return { status: 201, body: { key: { ...keyView(created, null, this.#use(created.id)), key: created.key } } }
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
    const s = this.#guards.change(req)
    const own = await this.#ownKey(s.accountId, req.params[0] ?? '')
    const revoked = await this.#admin.revokeKey({ id: own.id })
    return { status: 200, body: { key: keyView(revoked, own.lastUsed, this.#use(own.id)) } }
  }

  /** A change of one key's limits; the key cache drops the account's keys, so the next proxied call sees it. */
  updateLimits = async (req: Req): Promise<Reply> => {
    const s = this.#guards.change(req)
    const input = limitUpdate(req.body as Record<string, unknown>, false)
    const own = await this.#ownKey(s.accountId, req.params[0] ?? '')
    const row = await this.#admin.updateKey({ id: own.id, ...input })
    return { status: 200, body: { key: keyView(row, own.lastUsed, this.#use(own.id)) } }
  }

  /** The account's limits (binding all its keys together), their use, and whether this user may change them. */
  accountLimits = async (req: Req): Promise<Reply> => {
    const s = this.#guards.session(req)
    const [account, user] = await Promise.all([
      this.#store.call('getAccount', { id: s.accountId }),
      this.#store.call('getUser', { accountId: s.accountId, id: s.userId }),
    ])
    if (account === null || user === null || user.disabled) throw new TracegateError('unauthenticated')
    return { status: 200, body: this.#accountBody(s.accountId, account.limits, user.role === 'admin') }
  }

  /** Admins only: the account's limits cap every key, so a member must not be able to lift them. */
  updateAccountLimits = async (req: Req): Promise<Reply> => {
    const s = this.#guards.change(req)
    const user = await this.#store.call('getUser', { accountId: s.accountId, id: s.userId })
    if (user === null || user.disabled) throw new TracegateError('unauthenticated')
    if (user.role !== 'admin') throw new TracegateError('not_allowed', { message: 'Only an admin of the account may change its limits.' })
    const input = limitUpdate(req.body as Record<string, unknown>, true)
    const row = await this.#admin.updateAccount({ id: s.accountId, ...input })
    return { status: 200, body: this.#accountBody(s.accountId, row.limits, true) }
  }

  #accountBody (accountId: string, limits: Limits, editable: boolean): { limits: LimitsView; use: UseView; editable: boolean } {
    return { limits: limitsView(limits, true), use: useView(this.#limiter.usage({ accountId })), editable }
  }
}
