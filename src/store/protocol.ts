// Messages between the front thread and the store worker. Both sides import these with `import type`.
import type { ClickHouseServerConfig } from '../config.js'

export type Plan = 'free' | 'pro' | 'enterprise'
export const PLANS: readonly Plan[] = ['free', 'pro', 'enterprise']
export type Scope = 'proxy' | 'read'
export const SCOPES: readonly Scope[] = ['proxy', 'read']

export interface StoreWorkerData {
  readonly dataDir: string
  readonly clickhouse: ClickHouseServerConfig | null
  readonly migrationsDir: string
}

/** What the front thread needs to authenticate a request, cached per key hash. */
export interface KeyInfo {
  readonly keyId: string
  readonly accountId: string
  readonly scope: Scope
  readonly expiresAt: number | null
  readonly revoked: boolean
  readonly plan: Plan
  readonly serverSideKeys: boolean
}

export interface AccountRow {
  readonly id: string
  readonly name: string
  readonly plan: Plan
  readonly server_side_keys: boolean
  readonly created_at: string
}

export interface KeyRow {
  readonly id: string
  readonly account_id: string
  readonly name: string
  readonly prefix: string
  readonly scope: Scope
  readonly created_at: string
  readonly expires_at: string | null
  readonly revoked_at: string | null
}

export interface StoreOps {
  ping (): boolean
  migrate (): string[]
  lookupKey (args: { hash: string }): KeyInfo | null
  countAccounts (): number
  createAccount (args: { id: string; name: string; plan: Plan; serverSideKeys: boolean }): AccountRow
  getAccount (args: { id: string }): AccountRow | null
  createUser (args: { id: string; accountId: string; email: string; passwordHash: string; role: string }): { id: string; email: string }
  createKey (args: { id: string; accountId: string; hash: string; prefix: string; name: string; scope: Scope; expiresAt: number | null }): KeyRow
  revokeKey (args: { id: string }): { key: KeyRow; hash: string } | null
  listKeys (args: { accountId: string }): KeyRow[]
}

export type OpName = keyof StoreOps

export interface StoreRequest {
  readonly id: number
  readonly op: OpName
  readonly args: unknown
}

export type StoreResponse =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: { readonly message: string; readonly code: string | null } }
