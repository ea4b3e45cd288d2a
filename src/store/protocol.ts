// The contract between the front thread(s) and the store worker: the operation table (StoreOps, one
// entry per operation with its arguments and result; src/domain/rpc.ts gives it its shape) and the
// messages beside it. Both sides import it with `import type`; it imports no worker module, so what the
// contract names is what the shared types say (query-types.ts, trace-types.ts, insight-types.ts, domain/).
import type { ClickHouseServerConfig, TraceConfig } from '../config.js'
import type { AccountRow, KeyRow, UserRow } from '../domain/accounts.js'
import type { DetectionPatch } from '../domain/detection-policy.js'
import type { KeyInfo } from '../domain/key-info.js'
import type { LimitUsageRow, Limits, LimitsPatch } from '../domain/limits.js'
import type { Plan } from '../domain/plan.js'
import type { Op, Request, Response } from '../domain/rpc.js'
import type { Scope } from '../domain/scope.js'
import type { OtelSettings } from '../otel/settings.js'
import type { UsageGroupRow, UsersOrder } from './insight-types.js'
import type { Breakdown, Bucket, ExportArgs, SessionCalls, SqlQuery, SqlResult, SessionCallsQuery, SessionListFilter, SessionPage, TraceFilter, TracePage, UsageExtras, UsageRange, UsageReport, UsageScope } from './query-types.js'
import type { EncodedTraces } from './trace-codec.js'
import type { AdmittedCount, HeldRelease, TraceRow, TraceStats, TraceTotals, UsageMeasures } from './trace-types.js'

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

/**
 * Every operation the store worker answers: name → [arguments], result. The client's `call` and the
 * worker's handler object (worker/main.ts) are both typed from this table.
 */
export interface StoreOps {
  ping: Op<[], boolean>
  migrate: Op<[], string[]>
  lookupKey: Op<[{ hash: string }], KeyInfo | null>
  countAccounts: Op<[], number>
  createAccount: Op<[{ id: string; name: string; plan: Plan; serverSideKeys: boolean }], AccountRow>
  getAccount: Op<[{ id: string }], AccountRow | null>
  createUser: Op<[{ id: string; accountId: string; email: string; passwordHash: string; role: string }], { id: string; email: string }>
  createKey: Op<[{ id: string; accountId: string; hash: string; prefix: string; name: string; scope: Scope; expiresAt: number | null; limits?: Limits }], KeyRow>
  /** A new version of the key's row with the patch applied; 'key_not_found' when there is no such key. */
  updateKeyLimits: Op<[{ id: string; patch: LimitsPatch }], KeyRow>
  /**
   * The same for an account ('unknown_account'); a patch with maxBodyBytes is refused. `detection`, when
   * given, patches the account's detection policy in the same row version.
   */
  updateAccountLimits: Op<[{ id: string; patch: LimitsPatch; detection?: DetectionPatch }], AccountRow>
  /** Per key used this month: its use in the minute, UTC day and UTC month containing `now` (epoch ms). */
  limitUsage: Op<[{ now: number }], LimitUsageRow[]>
  revokeKey: Op<[{ id: string }], { key: KeyRow; hash: string } | null>
  listKeys: Op<[{ accountId: string }], KeyRow[]>
  /** Sign-in: the user with that (lower-case) email, with the password hash. */
  findUserByEmail: Op<[{ email: string }], (UserRow & { password_hash: string }) | null>
  getUser: Op<[{ accountId: string; id: string }], UserRow | null>
  /** The dashboard's trace list: filters, newest first, keyset pages. */
  listTraces: Op<[TraceFilter], TracePage>
  /** Totals of the list's filter (its cursor and order aside), the rows in memory included, each once. */
  traceTotals: Op<[TraceFilter], TraceTotals>
  /**
   * The filter's rows as CSV or JSONL, sent as ExportChunk messages before the reply (the rows sent);
   * each next chunk waits for the front thread's ExportAck (StoreClient.stream).
   */
  exportTraces: Op<[ExportArgs], { rows: number }>
  /** Per key of the account, the last minute it was used in (from the usage rollup). */
  keysLastUsed: Op<[{ accountId: string }], Array<{ key_id: string; last_used_at: string }>>
  /**
   * Inserts what is queued now (tests and shutdown; the timer does it otherwise), and sends the usage
   * report of every batch taken so far to the main thread; asked by the main thread, the report arrives
   * before the reply.
   */
  flushTraces: Op<[], TraceStats | null>
  traceStats: Op<[], TraceStats | null>
  getTrace: Op<[{ accountId: string; traceId: string }], TraceRow | null>
  usageTotals: Op<[UsageRange], UsageMeasures>
  usageSeries: Op<[UsageRange & { bucket: Bucket }], Array<UsageMeasures & { t: string }>>
  usageBreakdown: Op<[UsageRange & { by: Breakdown }], Array<UsageMeasures & { group: string }>>
  /** Totals, series and breakdowns from one query (one snapshot, so they always agree). */
  usageReport: Op<[UsageRange & { bucket: Bucket; keyId?: string | null }], UsageReport>
  /** From the traces: TTFT (and the whole report when a user is named), one query. */
  usageExtras: Op<[UsageScope], UsageExtras>
  /** From the traces: the busiest users of the scope, and how many users it has. */
  usageByUser: Op<[UsageScope & { order: UsersOrder }], { users: number; top: UsageGroupRow[] }>
  /** Sessions with calls in a window, most recently active first. */
  listSessions: Op<[SessionListFilter], SessionPage>
  /** One session's totals and a page of its calls, oldest first. */
  sessionCalls: Op<[SessionCallsQuery], SessionCalls>
  /** One query of the SQL port, checked and run for its account (worker/sql-query.ts). */
  sqlQuery: Op<[SqlQuery], SqlResult>
  /** Test seam: point the store at another ClickHouse (null: the embedded one) at the connection level. */
  testSwitchConnection: Op<[{ server: ClickHouseServerConfig | null }], boolean>
  /** Test seam: a read query, for tests that check what was stored. */
  testQuery: Op<[{ query: string; params?: Record<string, unknown> }], Array<Record<string, unknown>>>
  /** Every account, oldest first (the CLI's `account list`). */
  listAccounts: Op<[], AccountRow[]>
  /** A new password hash for the user with that (lower-case) email; null when there is none. */
  setPassword: Op<[{ email: string; passwordHash: string }], UserRow | null>
  /** What `tracegate doctor` asks the store: the ClickHouse version and the migrations applied and shipped. */
  storeStatus: Op<[], StoreStatus>
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
  /** What the batch's calls held on the request board, per key; absent: nothing. */
  readonly held?: HeldRelease[]
  /** Requests a front thread admitted since its last batch, per key, for the main thread's counts; absent: none. */
  readonly admitted?: AdmittedCount[]
  /** When the batch was posted (epoch ms): the store worker's own backlog is how late it takes it. */
  readonly sentAt: number
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

/** A call of one operation; `id` pairs it with its StoreResponse. */
export type StoreRequest<K extends OpName = OpName> = Request<StoreOps, K>
export type StoreResponse = Response<StoreOps>
