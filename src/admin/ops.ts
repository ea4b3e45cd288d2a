// The admin operations behind the CLI. They run wherever the store is: in the CLI's own process when
// no server holds the data directory, or inside the running server when the CLI reaches it over the
// local admin socket (admin-server.ts). Inputs are checked here, so both paths refuse the same things, with
// codes of the one error table.
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto'
import { promisify } from 'node:util'
import { v7 as uuidv7 } from 'uuid'
import { generateKey, hashKey, keyPrefix, parseDuration } from '../auth/keys.js'
import { TracegateError } from '../errors.js'
import { ADMIN_NAMES, isEmptyPatch, parseDetectionPatch } from '../detection/policy.js'
import { applyPatch, parseLimitsPatch } from '../limits/types.js'
import type { StoreClient } from '../store/client.js'
import type { StoreStatus } from '../store/protocol.js'
import { NO_LIMITS, type LimitsPatch } from '../domain/limits.js'
import { PLANS, type Plan } from '../domain/plan.js'
import { SCOPES, type Scope } from '../domain/scope.js'
import type { AccountRow, KeyRow } from '../domain/accounts.js'

const scryptAsync = promisify(scrypt) as (password: string, salt: Buffer, keylen: number, options: object) => Promise<Buffer>

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const EMAIL = /^[^\s@]+@[^\s@]+$/

function need (value: unknown, name: string): string {
  if (typeof value !== 'string' || value.trim() === '') throw new TracegateError('missing_argument', { message: `--${name} is required` })
  return value.trim()
}

function uuid (value: unknown, name: string): string {
  const v = need(value, name)
  if (!UUID.test(v)) throw new TracegateError('invalid_argument', { message: `--${name} must be an id (a UUID)` })
  return v.toLowerCase()
}

// scrypt parameters: N=2^15, r=8, p=1 (OWASP's minimum for scrypt is N=2^17 with p=1 at r=8; 2^15 keeps a
// sign-in near 50 ms on these 2-core machines). Stored as scrypt$N$r$p$salt$hash.
const SCRYPT = { N: 1 << 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 }

export async function hashPassword (password: string): Promise<string> {
  const salt = randomBytes(16)
  const hash = await scryptAsync(password, salt, 32, SCRYPT)
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64url')}$${hash.toString('base64url')}`
}

export async function verifyPassword (password: string, stored: string): Promise<boolean> {
  const [alg, n, r, p, salt, hash] = stored.split('$')
  if (alg !== 'scrypt' || salt === undefined || hash === undefined) return false
  const expected = Buffer.from(hash, 'base64url')
  const got = await scryptAsync(password, Buffer.from(salt, 'base64url'), expected.length,
    { N: Number(n), r: Number(r), p: Number(p), maxmem: SCRYPT.maxmem })
  return timingSafeEqual(expected, got)
}

/** The password rules of `user create` and `user reset-password`. */
function newPassword (value: unknown): string {
  const password = typeof value === 'string' ? value : ''
  if (password.length < 8) throw new TracegateError('invalid_argument', { message: 'the password must have at least 8 characters' })
  return password
}

function emailArg (value: unknown): string {
  const email = need(value, 'email').toLowerCase()
  if (!EMAIL.test(email)) throw new TracegateError('invalid_argument', { message: '--email must be an email address' })
  return email
}

/** The limit fields of createKey, updateKey and updateAccount (CLI flags, admin-socket JSON): numbers or
 * numeric strings; 'none' (or null, '') removes a limit; models as a list or a comma-separated string. */
export type LimitFields = {
  rpm?: unknown
  tpm?: unknown
  budget_day?: unknown
  budget_month?: unknown
  models?: unknown
  /** Keys only. */
  max_body_bytes?: unknown
}

/**
 * The detection fields of updateAccount: policy block|monitor|off, threshold and data spans' threshold (or 'none'), allow phrases
 * (list or comma-separated, or 'none'), and what the stored text keeps of PII and secrets (keep|mask).
 */
export type DetectionFields = {
  detection_policy?: unknown
  detection_threshold?: unknown
  detection_data_threshold?: unknown
  detection_allow?: unknown
  pii_at_rest?: unknown
}

const isEmptyLimits = (patch: LimitsPatch): boolean => Object.values(patch).every((v) => v === undefined)

/** An update must change something: a patch without a field is a missing argument, not a no-op. */
function changes (patch: LimitsPatch, forAccount: boolean): LimitsPatch {
  if (isEmptyLimits(patch)) {
    const flags = `--rpm, --tpm, --budget-day, --budget-month${forAccount ? ', --models, --detection-policy, --detection-threshold, --detection-data-threshold, --detection-allow or --pii-at-rest' : ', --models or --max-body-bytes'}`
    throw new TracegateError('missing_argument', { message: `give at least one of ${flags}` })
  }
  return patch
}

export interface ListedKey extends KeyRow {
  /** The last minute the key was used in (from the usage rollup), or null. */
  readonly last_used_at: string | null
}

export interface AdminStatus {
  /** The process that holds the store: the running server, or the CLI itself. */
  readonly pid: number
  readonly store: StoreStatus
}

export interface CreatedKey extends KeyRow {
  /** The only time the key's value exists outside the caller's hands. */
  readonly key: string
}

export class AdminOps {
  readonly #store: StoreClient
  readonly #onRevoke: (hash: string) => void | Promise<void>
  readonly #onPasswordReset: (userId: string) => void
  readonly #invalidateAccount: (accountId: string) => void | Promise<void>

  /**
   * `onPasswordReset` ends the user's dashboard sessions (dashboard/session.ts). `invalidateAccount` is told the
   * account whose key or account limits, detection policy or PII at rest changed, so the key cache drops its keys
   * (KeyCache.invalidateAccount) and the proxy's next call reads the change.
   */
  constructor (
    store: StoreClient,
    onRevoke: (hash: string) => void | Promise<void> = () => {},
    onPasswordReset: (userId: string) => void = () => {},
    invalidateAccount: (accountId: string) => void | Promise<void> = () => {},
  ) {
    this.#store = store
    this.#onRevoke = onRevoke
    this.#onPasswordReset = onPasswordReset
    this.#invalidateAccount = invalidateAccount
  }

  async migrate (): Promise<string[]> {
    return await this.#store.call('migrate')
  }

  async createAccount (args: { name?: unknown; plan?: unknown; serverSideKeys?: unknown }): Promise<AccountRow> {
    const name = need(args.name, 'name')
    const plan = need(args.plan, 'plan')
    if (!PLANS.includes(plan as Plan)) throw new TracegateError('invalid_argument', { message: `--plan must be one of ${PLANS.join(', ')}` })
    return await this.#store.call('createAccount', { id: uuidv7(), name, plan: plan as Plan, serverSideKeys: args.serverSideKeys === true })
  }

  async createUser (args: { account?: unknown; email?: unknown; password?: unknown; role?: unknown }): Promise<{ id: string; email: string }> {
    const accountId = uuid(args.account, 'account')
    const email = emailArg(args.email)
    const password = newPassword(args.password)
    const role = args.role === 'member' ? 'member' : 'admin'
    return this.#store.call('createUser', { id: uuidv7(), accountId, email, passwordHash: await hashPassword(password), role })
  }

  async createKey (args: { account?: unknown; scope?: unknown; name?: unknown; expiresIn?: unknown } & LimitFields): Promise<CreatedKey> {
    const accountId = uuid(args.account, 'account')
    const scope = need(args.scope, 'scope')
    if (!SCOPES.includes(scope as Scope)) throw new TracegateError('invalid_argument', { message: `--scope must be one of ${SCOPES.join(', ')}` })
    let expiresAt: number | null = null
    if (args.expiresIn !== undefined && args.expiresIn !== null) {
      const ms = parseDuration(String(args.expiresIn))
      if (ms === null) throw new TracegateError('invalid_argument', { message: '--expires-in must look like 30d, 12h, 45m or 90s' })
      expiresAt = Date.now() + ms
    }
    const limits = applyPatch(NO_LIMITS, parseLimitsPatch(args, { forAccount: false, code: 'invalid_argument' }))
    const name = typeof args.name === 'string' && args.name.trim() !== '' ? args.name.trim() : `${scope} key`
    const key = generateKey()
    const row = await this.#store.call('createKey', {
      id: uuidv7(), accountId, hash: hashKey(key), prefix: keyPrefix(key), name, scope: scope as Scope, expiresAt, limits,
    })
    return { ...row, key }
  }

  /** Changes a key's limits (an absent field stays, 'none' removes); the proxy sees them at its next call. */
  async updateKey (args: { id?: unknown } & LimitFields): Promise<KeyRow> {
    const id = uuid(args.id, 'id')
    const patch = changes(parseLimitsPatch(args, { forAccount: false, code: 'invalid_argument' }), false)
    const row = await this.#store.call('updateKeyLimits', { id, patch })
    await this.#invalidateAccount(row.account_id)
    return row
  }

  /**
   * Changes an account's limits, which bind all its keys together (max_body_bytes is refused here), and
   * its detection policy; both are checked before anything is written, and written as one row version.
   */
  async updateAccount (args: { id?: unknown } & LimitFields & DetectionFields): Promise<AccountRow> {
    const id = uuid(args.id, 'id')
    const limits = parseLimitsPatch(args, { forAccount: true, code: 'invalid_argument' })
    const detection = parseDetectionPatch(args, { names: ADMIN_NAMES, code: 'invalid_argument' })
    const patch = isEmptyPatch(detection) ? changes(limits, true) : limits
    const row = await this.#store.call('updateAccountLimits', { id, patch, ...(isEmptyPatch(detection) ? {} : { detection }) })
    await this.#invalidateAccount(row.id)
    return row
  }

  async revokeKey (args: { id?: unknown }): Promise<KeyRow> {
    const id = uuid(args.id, 'id')
    const r = await this.#store.call('revokeKey', { id })
    if (r === null) throw new TracegateError('key_not_found', { message: `no key with id ${id}` })
    // Returns once every front thread's key cache has dropped it: the next call anywhere is refused.
    await this.#onRevoke(r.hash)
    return r.key
  }

  async listKeys (args: { account?: unknown }): Promise<ListedKey[]> {
    const accountId = uuid(args.account, 'account')
    const [keys, used] = await Promise.all([
      this.#store.call('listKeys', { accountId }),
      this.#store.call('keysLastUsed', { accountId }),
    ])
    const last = new Map(used.map((u) => [u.key_id, u.last_used_at]))
    return keys.map((k) => ({ ...k, last_used_at: last.get(k.id) ?? null }))
  }

  async listAccounts (): Promise<AccountRow[]> {
    return await this.#store.call('listAccounts')
  }

  /** A new password (same rules as createUser); the user's dashboard sessions end. */
  async resetPassword (args: { email?: unknown; password?: unknown }): Promise<{ id: string; email: string }> {
    const email = emailArg(args.email)
    const password = newPassword(args.password)
    const user = await this.#store.call('setPassword', { email, passwordHash: await hashPassword(password) })
    if (user === null) throw new TracegateError('unknown_user', { message: `no user with email ${email}` })
    this.#onPasswordReset(user.id)
    return { id: user.id, email: user.email }
  }

  async status (): Promise<AdminStatus> {
    return { pid: process.pid, store: await this.#store.call('storeStatus') }
  }
}
