// Account, user and key reads and writes. Every query is parameterised; rows are versioned
// (ReplacingMergeTree by updated_at) and read with FINAL.
import { TracegateError } from '../../errors.js'
import { chTime } from './connect.js'
import { applyDetectionPatch } from '../../detection/policy.js'
import { applyPatch } from '../../limits/types.js'
import type { StoreOps } from '../protocol.js'
import type { ClientHolder } from './trace-writer.js'
import type { KeyInfo } from '../../domain/key-info.js'
import { DEFAULT_DETECTION, DETECTION_POLICIES, type AccountDetection, type DetectionPolicy, type PiiAtRest } from '../../domain/detection-policy.js'
import { NO_LIMITS, type Limits } from '../../domain/limits.js'
import type { AccountRow, KeyRow, UserRow } from '../../domain/accounts.js'

type Args<K extends keyof StoreOps> = StoreOps[K]['args'][0]

// UUIDs and DateTime64 values come out of JSONEachRow as strings already.
const LIMIT_COLUMNS = 'limit_rpm, limit_tpm, budget_day_usd, budget_month_usd, allowed_models'
const KEY_COLUMNS = `id, account_id, name, prefix, scope, created_at, expires_at, revoked_at, ${LIMIT_COLUMNS}, max_body_bytes`
const DETECTION_COLUMNS = 'detection_policy, detection_threshold, detection_data_threshold, detection_allow, pii_at_rest'
const ACCOUNT_COLUMNS = `id, name, plan, server_side_keys, created_at, ${LIMIT_COLUMNS}, ${DETECTION_COLUMNS}`
const USER_COLUMNS = 'id, account_id, email, role, NOT isNull(disabled_at) AS disabled'

/** The limit columns as stored (UInt64 values come as JSON numbers: connect.ts turns quoting off). */
interface LimitColumns {
  limit_rpm: number | null
  limit_tpm: number | null
  budget_day_usd: number | null
  budget_month_usd: number | null
  allowed_models: string[]
  max_body_bytes?: number | null
}

/** The detection policy columns of an account (migrations 010, 011 and 012). */
interface DetectionColumns {
  detection_policy: string
  detection_threshold: number | null
  detection_data_threshold: number | null
  detection_allow: string[]
  pii_at_rest: string
}

type RawKey = Omit<KeyRow, 'limits'> & LimitColumns
type RawAccount = Omit<AccountRow, 'limits' | 'server_side_keys' | 'detection'> & { server_side_keys: boolean | number } & LimitColumns & DetectionColumns

const num = (v: number | null | undefined): number | null => v === undefined ? null : v

/** NULL and [] are no limit, so rows from before migration 006 read as unlimited. */
function limitsOf (r: LimitColumns): Limits {
  return Object.freeze({
    rpm: num(r.limit_rpm),
    tpm: num(r.limit_tpm),
    budgetDayUsd: num(r.budget_day_usd),
    budgetMonthUsd: num(r.budget_month_usd),
    models: r.allowed_models.length === 0 ? null : Object.freeze([...r.allowed_models]),
    maxBodyBytes: num(r.max_body_bytes),
  })
}

function limitColumns (l: Limits): Omit<LimitColumns, 'max_body_bytes'> {
  return {
    limit_rpm: l.rpm,
    limit_tpm: l.tpm,
    budget_day_usd: l.budgetDayUsd,
    budget_month_usd: l.budgetMonthUsd,
    allowed_models: l.models === null ? [] : [...l.models],
  }
}

/** The column defaults are today's behaviour, so rows from before migrations 010, 011 and 012 read as DEFAULT_DETECTION. */
function detectionOf (r: DetectionColumns): AccountDetection {
  const policy = DETECTION_POLICIES.includes(r.detection_policy as DetectionPolicy) ? r.detection_policy as DetectionPolicy : 'block'
  // A value this version does not know (written by hand, or by a newer one) errs on the side of storing less.
  const piiAtRest: PiiAtRest = r.pii_at_rest === 'keep' ? 'keep' : 'mask'
  return Object.freeze({ policy, threshold: r.detection_threshold, dataThreshold: r.detection_data_threshold ?? null, allowPhrases: Object.freeze([...r.detection_allow]), piiAtRest })
}

function detectionColumns (d: AccountDetection): DetectionColumns {
  return { detection_policy: d.policy, detection_threshold: d.threshold, detection_data_threshold: d.dataThreshold, detection_allow: [...d.allowPhrases], pii_at_rest: d.piiAtRest }
}

function keyRow (r: RawKey): KeyRow {
  return {
    id: r.id, account_id: r.account_id, name: r.name, prefix: r.prefix, scope: r.scope,
    created_at: r.created_at, expires_at: r.expires_at, revoked_at: r.revoked_at, limits: limitsOf(r),
  }
}

function accountRow (r: RawAccount): AccountRow {
  // An account has no body size of its own.
  const limits = { ...limitsOf(r), maxBodyBytes: null }
  return {
    id: r.id, name: r.name, plan: r.plan, server_side_keys: Boolean(r.server_side_keys), created_at: r.created_at,
    limits: Object.freeze(limits), detection: detectionOf(r),
  }
}

export class AccountStore {
  readonly #holder: ClientHolder

  /** Takes the holder, not the client, so a test's connection switch reaches it too. */
  constructor (holder: ClientHolder) {
    this.#holder = holder
  }

  get #ch () {
    return this.#holder.client
  }

  async #rows<T> (query: string, params: Record<string, unknown>): Promise<T[]> {
    const rs = await this.#ch.query({ query, query_params: params, format: 'JSONEachRow' })
    return rs.json<T>()
  }

  async lookupKey ({ hash }: Args<'lookupKey'>): Promise<KeyInfo | null> {
    const rows = await this.#rows<{
      id: string; account_id: string; scope: string; expires_ms: string | null; revoked: number
    } & LimitColumns>(`SELECT id, account_id, scope,
          if(isNull(expires_at), NULL, toString(toUnixTimestamp64Milli(expires_at))) AS expires_ms,
          NOT isNull(revoked_at) AS revoked, ${LIMIT_COLUMNS}, max_body_bytes
        FROM api_keys FINAL WHERE key_hash = {hash:FixedString(64)} LIMIT 1`, { hash })
    const k = rows[0]
    if (k === undefined) return null
    const account = await this.getAccount({ id: k.account_id })
    if (account === null) return null
    return {
      keyId: k.id,
      accountId: k.account_id,
      scope: k.scope as KeyInfo['scope'],
      expiresAt: k.expires_ms === null ? null : Number(k.expires_ms),
      revoked: Boolean(k.revoked),
      plan: account.plan,
      serverSideKeys: account.server_side_keys,
      limits: limitsOf(k),
      accountLimits: account.limits,
      detection: account.detection,
    }
  }

  async countAccounts (): Promise<number> {
    const rows = await this.#rows<{ n: string }>('SELECT count() AS n FROM accounts FINAL', {})
    return Number(rows[0]?.n ?? 0)
  }

  async getAccount ({ id }: Args<'getAccount'>): Promise<AccountRow | null> {
    const rows = await this.#rows<RawAccount>(`SELECT ${ACCOUNT_COLUMNS}
        FROM accounts FINAL WHERE id = {id:UUID}`, { id })
    const row = rows[0]
    return row === undefined ? null : accountRow(row)
  }

  async createAccount ({ id, name, plan, serverSideKeys }: Args<'createAccount'>): Promise<AccountRow> {
    const now = chTime(Date.now())
    await this.#ch.insert({
      table: 'accounts',
      values: [{ id, name, plan, server_side_keys: serverSideKeys, created_at: now, updated_at: now }],
      format: 'JSONEachRow',
    })
    return { id, name, plan, server_side_keys: serverSideKeys, created_at: now, limits: NO_LIMITS, detection: DEFAULT_DETECTION }
  }

  async #requireAccount (id: string): Promise<void> {
    if (await this.getAccount({ id }) === null) throw new TracegateError('unknown_account', { message: `no account with id ${id}` })
  }

  async createUser ({ id, accountId, email, passwordHash, role }: Args<'createUser'>): Promise<{ id: string; email: string }> {
    await this.#requireAccount(accountId)
    const taken = await this.#rows<{ id: string }>(
      'SELECT id FROM users FINAL WHERE email = {email:String} LIMIT 1', { email })
    if (taken.length > 0) throw new TracegateError('email_taken', { message: 'a user with that email already exists' })
    const now = chTime(Date.now())
    await this.#ch.insert({
      table: 'users',
      values: [{ account_id: accountId, id, email, password_hash: passwordHash, role, created_at: now, updated_at: now }],
      format: 'JSONEachRow',
    })
    return { id, email }
  }

  /** The user behind a sign-in, with the password hash (it never leaves the server). */
  async findUserByEmail ({ email }: Args<'findUserByEmail'>): Promise<(UserRow & { password_hash: string }) | null> {
    const rows = await this.#rows<UserRow & { password_hash: string }>(`SELECT ${USER_COLUMNS}, password_hash
        FROM users FINAL WHERE email = {email:String} LIMIT 1`, { email })
    const row = rows[0]
    return row === undefined ? null : { ...row, disabled: Boolean(row.disabled) }
  }

  async getUser ({ accountId, id }: Args<'getUser'>): Promise<UserRow | null> {
    const rows = await this.#rows<UserRow>(`SELECT ${USER_COLUMNS}
        FROM users FINAL WHERE account_id = {accountId:UUID} AND id = {id:UUID} LIMIT 1`, { accountId, id })
    const row = rows[0]
    return row === undefined ? null : { ...row, disabled: Boolean(row.disabled) }
  }

  async createKey (args: Args<'createKey'>): Promise<KeyRow> {
    await this.#requireAccount(args.accountId)
    const now = chTime(Date.now())
    const expires = args.expiresAt === null ? null : chTime(args.expiresAt)
    const limits = args.limits ?? NO_LIMITS
    await this.#ch.insert({
      table: 'api_keys',
      values: [{
        account_id: args.accountId,
        id: args.id,
        key_hash: args.hash,
        prefix: args.prefix,
        name: args.name,
        scope: args.scope,
        created_at: now,
        expires_at: expires,
        revoked_at: null,
        ...limitColumns(limits),
        max_body_bytes: limits.maxBodyBytes,
        updated_at: now,
      }],
      format: 'JSONEachRow',
    })
    return {
      id: args.id, account_id: args.accountId, name: args.name, prefix: args.prefix, scope: args.scope,
      created_at: now, expires_at: expires, revoked_at: null, limits,
    }
  }

  async revokeKey ({ id }: Args<'revokeKey'>): Promise<{ key: KeyRow; hash: string } | null> {
    const rows = await this.#rows<Record<string, unknown>>(
      'SELECT * FROM api_keys FINAL WHERE id = {id:UUID} LIMIT 1', { id })
    const row = rows[0]
    if (row === undefined) return null
    const now = Date.now()
    // Revoking twice keeps the first revocation time.
    const revokedAt = row.revoked_at ?? chTime(now)
    const updatedAt = nextUpdatedAt(row.updated_at, now)
    await this.#ch.insert({
      table: 'api_keys',
      values: [{ ...row, revoked_at: revokedAt, updated_at: updatedAt }],
      format: 'JSONEachRow',
    })
    const [key] = await this.#rows<RawKey>(`SELECT ${KEY_COLUMNS} FROM api_keys FINAL WHERE id = {id:UUID}`, { id })
    return { key: keyRow(key!), hash: String(row.key_hash) }
  }

  /** A new version of the key's row: the other columns as they are, the limits patched. */
  async updateKeyLimits ({ id, patch }: Args<'updateKeyLimits'>): Promise<KeyRow> {
    const rows = await this.#rows<RawKey & { updated_at: string }>('SELECT * FROM api_keys FINAL WHERE id = {id:UUID} LIMIT 1', { id })
    const row = rows[0]
    if (row === undefined) throw new TracegateError('key_not_found', { message: `no key with id ${id}` })
    const limits = applyPatch(limitsOf(row), patch)
    const next = { ...row, ...limitColumns(limits), max_body_bytes: limits.maxBodyBytes, updated_at: nextUpdatedAt(row.updated_at, Date.now()) }
    await this.#ch.insert({ table: 'api_keys', values: [next], format: 'JSONEachRow' })
    return keyRow(next)
  }

  /**
   * The same for an account, with its detection policy patched too when `detection` is given (one row
   * version for both); an account has no body size, so a patch that sets one is refused.
   */
  async updateAccountLimits ({ id, patch, detection }: Args<'updateAccountLimits'>): Promise<AccountRow> {
    if (patch.maxBodyBytes !== undefined) throw new TracegateError('invalid_argument', { param: 'max_body_bytes', message: 'max_body_bytes is a limit of keys only' })
    const rows = await this.#rows<RawAccount & { updated_at: string }>('SELECT * FROM accounts FINAL WHERE id = {id:UUID} LIMIT 1', { id })
    const row = rows[0]
    if (row === undefined) throw new TracegateError('unknown_account', { message: `no account with id ${id}` })
    const limits = applyPatch(limitsOf(row), patch)
    const policy = detection === undefined ? detectionOf(row) : applyDetectionPatch(detectionOf(row), detection)
    const next = { ...row, ...limitColumns(limits), ...detectionColumns(policy), updated_at: nextUpdatedAt(row.updated_at, Date.now()) }
    await this.#ch.insert({ table: 'accounts', values: [next], format: 'JSONEachRow' })
    return accountRow(next)
  }

  async listKeys ({ accountId }: Args<'listKeys'>): Promise<KeyRow[]> {
    const rows = await this.#rows<RawKey>(`SELECT ${KEY_COLUMNS} FROM api_keys FINAL
      WHERE account_id = {accountId:UUID} ORDER BY created_at DESC, id DESC`, { accountId })
    return rows.map(keyRow)
  }

  async listAccounts (): Promise<AccountRow[]> {
    const rows = await this.#rows<RawAccount>(`SELECT ${ACCOUNT_COLUMNS}
        FROM accounts FINAL ORDER BY created_at, id`, {})
    return rows.map(accountRow)
  }

  /** A new version of the user's row with the new hash; the caller ends the user's sessions. */
  async setPassword ({ email, passwordHash }: Args<'setPassword'>): Promise<UserRow | null> {
    const rows = await this.#rows<Record<string, unknown>>(
      'SELECT * FROM users FINAL WHERE email = {email:String} LIMIT 1', { email })
    const row = rows[0]
    if (row === undefined) return null
    await this.#ch.insert({
      table: 'users',
      values: [{ ...row, password_hash: passwordHash, updated_at: nextUpdatedAt(row.updated_at, Date.now()) }],
      format: 'JSONEachRow',
    })
    return { id: String(row.id), account_id: String(row.account_id), email: String(row.email), role: String(row.role), disabled: row.disabled_at !== null }
  }
}

/** A row's next version time: updated_at must grow even when two versions land in the same millisecond. */
function nextUpdatedAt (previous: unknown, now: number): string {
  return chTime(Math.max(now, Date.parse(String(previous).replace(' ', 'T') + 'Z') + 1))
}
