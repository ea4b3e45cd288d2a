// Messages between the front thread and the store worker. Both sides import these with `import type`.
import type { ClickHouseServerConfig, TraceConfig } from '../config.js'
import type { OtelSettings } from '../otel/settings.js'
import type { EncodedTraces } from './trace-codec.js'
import type { TraceStats } from './trace-types.js'
import type { TraceFilter, TracePage } from './worker/trace-queries.js'
import type { TraceTotals } from './worker/trace-totals.js'
import type { ExportArgs } from './worker/trace-export.js'
import type { UsageReport } from './worker/usage-report.js'
import type { Breakdown, Bucket, UsageRange } from './worker/usage-queries.js'
import type { TraceRow, UsageMeasures } from './trace-types.js'
import type { KeyInfo } from '../auth/authenticate.js'
import type { LimitUsageRow, Limits, LimitsPatch } from '../limits/types.js'
import type { AccountDetection, DetectionPatch } from '../detection/policy.js'
import type { UsageGroupRow, UsersOrder } from './insight-types.js'
import type { UsageExtras, UsageScope } from './worker/usage-extra-queries.js'
import type { SessionCalls, SessionCallsQuery, SessionListFilter, SessionPage } from './worker/session-queries.js'

export type Plan = 'free' | 'pro' | 'enterprise'
export const PLANS: readonly Plan[] = ['free', 'pro', 'enterprise']
export type Scope = 'proxy' | 'read'
export const SCOPES: readonly Scope[] = ['proxy', 'read']

export interface StoreWorkerData {
  readonly dataDir: string
  readonly clickhouse: ClickHouseServerConfig | null
  readonly migrationsDir: string
  readonly traces: TraceConfig
  /** Span export over OTLP (store/worker/spans.ts), or null when no endpoint is configured. */
  readonly otel: OtelSettings | null
  readonly pricingFile: string | null
  /** Enables the test-only operations (connection switch, raw queries). Never set by the CLI. */
  readonly testSeams: boolean
}

export interface AccountRow {
  readonly id: string
  readonly name: string
  readonly plan: Plan
  readonly server_side_keys: boolean
  readonly created_at: string
  /** Limits on all the account's keys together (maxBodyBytes is always null here). */
  readonly limits: Limits
  /** What detection does with the account's calls (block, monitor, off), its threshold and allow phrases. */
  readonly detection: AccountDetection
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
  readonly limits: Limits
}


export interface UserRow {
  readonly id: string
  readonly account_id: string
  readonly email: string
  readonly role: string
  readonly disabled: boolean
}

export interface StoreOps {
  ping (): boolean
  migrate (): string[]
  lookupKey (args: { hash: string }): KeyInfo | null
  countAccounts (): number
  createAccount (args: { id: string; name: string; plan: Plan; serverSideKeys: boolean }): AccountRow
  getAccount (args: { id: string }): AccountRow | null
  createUser (args: { id: string; accountId: string; email: string; passwordHash: string; role: string }): { id: string; email: string }
  createKey (args: { id: string; accountId: string; hash: string; prefix: string; name: string; scope: Scope; expiresAt: number | null; limits?: Limits }): KeyRow
  /** A new version of the key's row with the patch applied; 'key_not_found' when there is no such key. */
  updateKeyLimits (args: { id: string; patch: LimitsPatch }): KeyRow
  /**
   * The same for an account ('unknown_account'); a patch with maxBodyBytes is refused. `detection`, when
   * given, patches the account's detection policy in the same row version.
   */
  updateAccountLimits (args: { id: string; patch: LimitsPatch; detection?: DetectionPatch }): AccountRow
  /** Per key used this month: its use in the minute, UTC day and UTC month containing `now` (epoch ms). */
  limitUsage (args: { now: number }): LimitUsageRow[]
  revokeKey (args: { id: string }): { key: KeyRow; hash: string } | null
  listKeys (args: { accountId: string }): KeyRow[]
  /** Sign-in: the user with that (lower-case) email, with the password hash. */
  findUserByEmail (args: { email: string }): (UserRow & { password_hash: string }) | null
  getUser (args: { accountId: string; id: string }): UserRow | null
  /** The dashboard's trace list: filters, newest first, keyset pages. */
  listTraces (args: TraceFilter): TracePage
  /** Totals of the list's filter (its cursor and order aside), the rows in memory included, each once. */
  traceTotals (args: TraceFilter): TraceTotals
  /**
   * The filter's rows as CSV or JSONL, sent as ExportChunk messages before the reply (the rows sent);
   * each next chunk waits for the front thread's ExportAck (StoreClient.stream).
   */
  exportTraces (args: ExportArgs): { rows: number }
  /** Per key of the account, the last minute it was used in (from the usage rollup). */
  keysLastUsed (args: { accountId: string }): Array<{ key_id: string; last_used_at: string }>
  /** Inserts what is queued now (tests and shutdown; the timer does it otherwise). */
  flushTraces (): TraceStats
  traceStats (): TraceStats
  getTrace (args: { accountId: string; traceId: string }): TraceRow | null
  usageTotals (args: UsageRange): UsageMeasures
  usageSeries (args: UsageRange & { bucket: Bucket }): Array<UsageMeasures & { t: string }>
  usageBreakdown (args: UsageRange & { by: Breakdown }): Array<UsageMeasures & { group: string }>
  /** Totals, series and breakdowns from one query (one snapshot, so they always agree). */
  usageReport (args: UsageRange & { bucket: Bucket; keyId?: string | null }): UsageReport
  /** From the traces: TTFT (and the whole report when a user is named), one query. */
  usageExtras (args: UsageScope): UsageExtras
  /** From the traces: the busiest users of the scope, and how many users it has. */
  usageByUser (args: UsageScope & { order: UsersOrder }): { users: number; top: UsageGroupRow[] }
  /** Sessions with calls in a window, most recently active first. */
  listSessions (args: SessionListFilter): SessionPage
  /** One session's totals and a page of its calls, oldest first. */
  sessionCalls (args: SessionCallsQuery): SessionCalls
  /** Test seam: point the store at another ClickHouse (null: the embedded one) at the connection level. */
  testSwitchConnection (args: { server: ClickHouseServerConfig | null }): boolean
  /** Test seam: a read query, for tests that check what was stored. */
  testQuery (args: { query: string; params?: Record<string, unknown> }): Array<Record<string, unknown>>
  /** Every account, oldest first (the CLI's `account list`). */
  listAccounts (): AccountRow[]
  /** A new password hash for the user with that (lower-case) email; null when there is none. */
  setPassword (args: { email: string; passwordHash: string }): UserRow | null
  /** What `tracegate doctor` asks the store: the ClickHouse version and the migrations applied and shipped. */
  storeStatus (): StoreStatus
}

export interface StoreStatus {
  /** The ClickHouse server's URL (no credentials), or null for the embedded one. */
  readonly url: string | null
  readonly version: string
  /** Migration files recorded in schema_migrations, by name. */
  readonly applied: string[]
  /** Migration files this install ships, by name. */
  readonly available: string[]
}

/** The accounts whose stored traces the front thread wants as live batches (they have a live list open). */
export interface LiveMessage {
  readonly live: readonly string[]
}

/** Finished exchanges, sent without a reply; `handoff` names their hand-off file in the spool folder. */
export interface TraceMessage {
  readonly traces: EncodedTraces
  readonly handoff?: string
}

export type OpName = keyof StoreOps

/** A piece of a streamed answer (exportTraces), sent before the request's reply. */
export interface ExportChunk {
  readonly id: number
  readonly chunk: string
}

/** The front thread took the request's last chunk: `more` false stops the stream (the client left). */
export interface ExportAck {
  readonly ack: number
  readonly more: boolean
}

export interface StoreRequest {
  readonly id: number
  readonly op: OpName
  readonly args: unknown
}

export type StoreResponse =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: { readonly message: string; readonly code: string | null } }
