// Query strings of the trace list and usage endpoints, checked once: a bad value is 400
// invalid_parameter naming it. An empty value means the parameter was not given (a form's empty filter).
import { PROVIDERS } from '../providers/index.js'
import { TracegateError } from '../errors.js'
import { OUTCOMES } from '../domain/outcome.js'
import { SORT_KEYS, type SortKey } from '../domain/sort-key.js'
import type { UsersOrder } from '../store/insight-types.js'
import type { Bucket, ExportFormat, ListCursor, SessionCallsQuery, SessionCursor, SessionListFilter, TraceCursor, TraceFilter } from '../store/query-types.js'

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const CH_TIME = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,3})?$/

/** The longest user, session and tag a trace can hold (the proxy refuses longer label headers). */
export const MAX_USER = 256
export const MAX_SESSION = 256
export const MAX_TAG = 64

export const DEFAULT_LIMIT = 50
export const MAX_LIMIT = 200

function bad (param: string): TracegateError {
  return new TracegateError('invalid_parameter', { param })
}

function get (q: URLSearchParams, name: string): string | null {
  const v = q.get(name)
  return v === null || v === '' ? null : v
}

/**
 * A label filter: a value longer than any stored label matches nothing and is refused. Counted in code
 * points, which are never more than UTF-16 units or UTF-8 bytes, so no storable label is refused.
 */
function label (q: URLSearchParams, name: string, max: number): string | null {
  const v = get(q, name)
  if (v === null || v.length <= max) return v
  let n = 0
  for (const _ of v) if (++n > max) throw bad(name)
  return v
}

/** ClickHouse's `YYYY-MM-DD hh:mm:ss[.sss]` (UTC) as epoch ms. */
export function chEpoch (t: string): number {
  return Date.parse(t.replace(' ', 'T') + 'Z')
}

/** Epoch milliseconds or an ISO 8601 date/time. */
export function parseTime (q: URLSearchParams, name: string): number | null {
  const v = get(q, name)
  if (v === null) return null
  const ms = /^\d{1,15}$/.test(v) ? Number(v) : /^\d{4}-\d\d-\d\d/.test(v) ? Date.parse(v) : NaN
  if (!Number.isFinite(ms) || ms < 0 || ms > 253402300799999) throw bad(name)
  return ms
}

export function encodeCursor (c: TraceCursor): string {
  return Buffer.from(JSON.stringify([c.time, c.traceId])).toString('base64url')
}

export function decodeCursor (text: string): TraceCursor {
  try {
    const v = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown
    if (Array.isArray(v) && typeof v[0] === 'string' && CH_TIME.test(v[0]) && typeof v[1] === 'string' && UUID.test(v[1])) {
      return { time: v[0], traceId: v[1].toLowerCase() }
    }
  } catch { /* falls through */ }
  throw bad('cursor')
}

/** ClickHouse's fixed-width DateTime64(3) text (UTC) of epoch ms: the list compares times as this text. */
function chText (ms: number): string {
  return new Date(ms).toISOString().replace('T', ' ').replace('Z', '')
}

/** The list's cursor: its order, the last row's sort value, time and trace id. */
export function encodeListCursor (f: Pick<TraceFilter, 'sort' | 'order'>, c: ListCursor): string {
  return Buffer.from(JSON.stringify([f.sort, f.order, c.value, c.time, c.traceId])).toString('base64url')
}

/** A cursor made under another order than the request's is refused: it would skip or repeat rows. */
function decodeListCursor (f: Pick<TraceFilter, 'sort' | 'order'>, text: string): ListCursor {
  try {
    const v = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown
    if (Array.isArray(v) && v.length === 5 && v[0] === f.sort && v[1] === f.order &&
      (f.sort === 'time' ? v[2] === null : typeof v[2] === 'number' && Number.isFinite(v[2])) &&
      typeof v[3] === 'string' && CH_TIME.test(v[3]) && typeof v[4] === 'string' && UUID.test(v[4])) {
      return { value: v[2] as number | null, time: chText(chEpoch(v[3])), traceId: v[4].toLowerCase() }
    }
  } catch { /* falls through */ }
  throw bad('cursor')
}

/** A comma-separated list of values, each one of `allowed`; null when not given. */
function list<T extends string> (q: URLSearchParams, name: string, allowed: readonly T[]): T[] | null {
  const v = get(q, name)
  if (v === null) return null
  const out: T[] = []
  for (const x of v.split(',')) {
    const s = x.trim() as T
    if (!allowed.includes(s)) throw bad(name)
    if (!out.includes(s)) out.push(s)
  }
  return out
}

/** A number of at least 0 (decimals allowed); null when not given. */
function amount (q: URLSearchParams, name: string): number | null {
  const v = get(q, name)
  if (v === null) return null
  const n = /^\d{1,15}(\.\d{1,12})?$/.test(v) ? Number(v) : NaN
  if (!Number.isFinite(n)) throw bad(name)
  return n
}

function flag (q: URLSearchParams, name: string): boolean | null {
  const v = get(q, name)
  if (v === null) return null
  if (v === 'true') return true
  if (v === 'false') return false
  throw bad(name)
}

export const STATUS_CLASSES: readonly string[] = ['1xx', '2xx', '3xx', '4xx', '5xx']
/** Longer than any metadata key=value a trace can hold (x-tracegate-metadata is at most 4096 bytes). */
const MAX_META = 4096

/**
 * The list's filters, sort and page. Also takes `range=hour|day|7d|30d|all` in place of `from` (the
 * list's time filter). Lists (`outcome`, `status`) are comma-separated and match any of their values.
 */
export function traceFilter (accountId: string, q: URLSearchParams, now = Date.now()): TraceFilter {
  let from = parseTime(q, 'from')
  const range = get(q, 'range')
  if (from === null && range !== null && range !== 'all') {
    const r = Object.hasOwn(RANGES, range) ? RANGES[range] : undefined
    if (r === undefined) throw bad('range')
    from = now - r.span
  }
  const to = parseTime(q, 'to')
  if (from !== null && to !== null && from >= to) throw bad('to')
  const provider = get(q, 'provider')
  if (provider !== null && !(PROVIDERS as readonly string[]).includes(provider)) throw bad('provider')
  const model = get(q, 'model')
  if (model !== null && model.length > 256) throw bad('model')
  const outcomes = list(q, 'outcome', OUTCOMES)
  const statuses = list(q, 'status', STATUS_CLASSES)
  const latencyMin = amount(q, 'latency_min')
  const latencyMax = amount(q, 'latency_max')
  if (latencyMin !== null && latencyMax !== null && latencyMin > latencyMax) throw bad('latency_max')
  const costMin = amount(q, 'cost_min')
  const costMax = amount(q, 'cost_max')
  if (costMin !== null && costMax !== null && costMin > costMax) throw bad('cost_max')
  const rawMeta = get(q, 'metadata')
  let meta: TraceFilter['meta'] = null
  if (rawMeta !== null) {
    const at = rawMeta.indexOf('=')
    if (at <= 0 || rawMeta.length > MAX_META) throw bad('metadata')
    meta = { key: rawMeta.slice(0, at), value: rawMeta.slice(at + 1) }
  }
  const sort = (get(q, 'sort') ?? 'time') as SortKey
  if (!SORT_KEYS.includes(sort)) throw bad('sort')
  const order = get(q, 'order') ?? 'desc'
  if (order !== 'asc' && order !== 'desc') throw bad('order')
  const keyId = keyParam(q)
  const user = label(q, 'user', MAX_USER)
  const session = label(q, 'session', MAX_SESSION)
  const tag = label(q, 'tag', MAX_TAG)
  const text = get(q, 'q')
  if (text !== null && text.length > 1000) throw bad('q')
  const limit = limitOf(q, DEFAULT_LIMIT, MAX_LIMIT)
  const cursor = get(q, 'cursor')
  return {
    accountId,
    from,
    to,
    provider,
    model,
    outcomes,
    statusClasses: statuses === null ? null : statuses.map((x) => Number(x[0])),
    latencyMin,
    latencyMax,
    costMin,
    costMax,
    streaming: flag(q, 'streaming'),
    confidential: flag(q, 'confidential'),
    fellOver: flag(q, 'fell_over'),
    keyId,
    user,
    session,
    tag,
    meta,
    q: text,
    sort,
    order,
    limit,
    cursor: cursor === null ? null : decodeListCursor({ sort, order }, cursor),
  }
}

export const EXPORT_DEFAULT_ROWS = 10_000
export const EXPORT_MAX_ROWS = 100_000

/** An export: the list's filters and order (no page), `format=csv|jsonl`, `max_rows` (default 10,000, at most 100,000). */
export function exportQuery (accountId: string, q: URLSearchParams, now = Date.now()): { filter: TraceFilter; format: ExportFormat; maxRows: number } {
  const format = get(q, 'format')
  if (format !== 'csv' && format !== 'jsonl') throw bad('format')
  const raw = get(q, 'max_rows')
  const maxRows = raw === null ? EXPORT_DEFAULT_ROWS : /^\d{1,6}$/.test(raw) ? Number(raw) : NaN
  if (!(maxRows >= 1 && maxRows <= EXPORT_MAX_ROWS)) throw bad('max_rows')
  if (get(q, 'cursor') !== null) throw bad('cursor')
  const p = new URLSearchParams(q)
  p.delete('limit')
  return { filter: traceFilter(accountId, p, now), format, maxRows }
}

export interface UsageWindow {
  readonly from: number
  readonly to: number
  readonly bucket: Bucket
}

const BUCKET_MS: Readonly<Record<Bucket, number>> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 }
const RANGES: Readonly<Record<string, { span: number; bucket: Bucket }>> = {
  hour: { span: 3_600_000, bucket: 'minute' },
  day: { span: 86_400_000, bucket: 'hour' },
  '7d': { span: 7 * 86_400_000, bucket: 'day' },
  '30d': { span: 30 * 86_400_000, bucket: 'day' },
}
/** More points than any chart can show. */
const MAX_POINTS = 5_000

export function bucketMs (b: Bucket): number {
  return BUCKET_MS[b]
}

/** `range=hour|day|7d|30d` (default day), or `from` [, `to`, `bucket`]. */
export function usageWindow (q: URLSearchParams, now = Date.now()): UsageWindow {
  const from = parseTime(q, 'from')
  const toGiven = parseTime(q, 'to')
  const rawBucket = get(q, 'bucket')
  if (rawBucket !== null && !(rawBucket in BUCKET_MS)) throw bad('bucket')
  if (from === null) {
    if (toGiven !== null) throw bad('from')
    const name = get(q, 'range') ?? 'day'
    const range = Object.hasOwn(RANGES, name) ? RANGES[name] : undefined
    if (range === undefined) throw bad('range')
    return { from: now - range.span, to: now, bucket: (rawBucket as Bucket | null) ?? range.bucket }
  }
  const to = toGiven ?? now
  if (from >= to) throw bad('to')
  const span = to - from
  const bucket = (rawBucket as Bucket | null) ?? (span <= 3 * 3_600_000 ? 'minute' : span <= 3 * 86_400_000 ? 'hour' : 'day')
  if (span / BUCKET_MS[bucket] > MAX_POINTS) throw bad('bucket')
  return { from, to, bucket }
}

/** The usage answer's drill-down: `key` (a key id), `user` (a user label), `users_by=requests|cost`. */
export function usageScope (q: URLSearchParams): { keyId: string | null; user: string | null; usersBy: UsersOrder } {
  const keyId = keyParam(q)
  const user = label(q, 'user', MAX_USER)
  const usersBy = get(q, 'users_by') ?? 'requests'
  if (usersBy !== 'requests' && usersBy !== 'cost') throw bad('users_by')
  return { keyId, user, usersBy }
}

/** `key`: a key id (a UUID, answered in lower case), or null when not given. */
function keyParam (q: URLSearchParams): string | null {
  const keyId = get(q, 'key')
  if (keyId !== null && !UUID.test(keyId)) throw bad('key')
  return keyId?.toLowerCase() ?? null
}

/** `limit`: 1..max, `fallback` when not given. */
function limitOf (q: URLSearchParams, fallback: number, max: number): number {
  const raw = get(q, 'limit')
  const limit = raw === null ? fallback : /^\d{1,4}$/.test(raw) ? Number(raw) : NaN
  if (!(limit >= 1 && limit <= max)) throw bad('limit')
  return limit
}

export const SESSION_LIST_MAX = 200
export const SESSION_CALLS_DEFAULT = 100
export const SESSION_CALLS_MAX = 500

/**
 * The session list: a window (`range=hour|day|7d|30d`, default 7d, or `from` [, `to`]) that bounds the
 * scan, `user`, `limit` (default 50, max 200) and `cursor`.
 */
export function sessionListFilter (accountId: string, q: URLSearchParams, now = Date.now()): SessionListFilter {
  let from = parseTime(q, 'from')
  const to = parseTime(q, 'to') ?? now
  if (from === null) {
    if (get(q, 'to') !== null) throw bad('from')
    const name = get(q, 'range') ?? '7d'
    const range = Object.hasOwn(RANGES, name) ? RANGES[name] : undefined
    if (range === undefined) throw bad('range')
    from = to - range.span
  }
  if (from >= to) throw bad('to')
  const user = label(q, 'user', MAX_USER)
  const limit = limitOf(q, DEFAULT_LIMIT, SESSION_LIST_MAX)
  const raw = get(q, 'cursor')
  let cursor: SessionCursor | null = null
  if (raw !== null) {
    try {
      const v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown
      if (Array.isArray(v) && typeof v[0] === 'string' && CH_TIME.test(v[0]) && typeof v[1] === 'string' && v[1] !== '') {
        cursor = { last: v[0], session: v[1] }
      }
    } catch { /* refused below */ }
    if (cursor === null) throw bad('cursor')
  }
  return { accountId, from, to, user, limit, cursor }
}

export function encodeSessionCursor (c: SessionCursor): string {
  return Buffer.from(JSON.stringify([c.last, c.session])).toString('base64url')
}

/**
 * One session's page of calls: `limit` (default 100, max 500) and `cursor` (the trace list's cursor form).
 * Null for an id no stored call can carry ('' or longer than a session label can be).
 */
export function sessionCallsQuery (accountId: string, id: string, q: URLSearchParams): SessionCallsQuery | null {
  const limit = limitOf(q, SESSION_CALLS_DEFAULT, SESSION_CALLS_MAX)
  const cursor = get(q, 'cursor')
  const c = cursor === null ? null : decodeCursor(cursor)
  if (id === '' || [...id].length > MAX_SESSION) return null
  return { accountId, session: id, limit, cursor: c }
}
