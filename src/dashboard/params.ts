// Query strings of the trace list and usage endpoints, checked once: a bad value is 400
// invalid_parameter naming it. An empty value means the parameter was not given (a form's empty filter).
import { PROVIDERS } from '../providers/index.js'
import { TracegateError } from '../errors.js'
import type { TraceCursor, TraceFilter } from '../store/worker/trace-queries.js'
import type { Bucket } from '../store/worker/usage-queries.js'
import type { UsersOrder } from '../store/insight-types.js'
import type { SessionCallsQuery, SessionCursor, SessionListFilter } from '../store/worker/session-queries.js'

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
export const OUTCOMES: readonly string[] = ['ok', 'blocked', 'limited', 'provider_error', 'provider_stream_error', 'client_aborted', 'rejected', 'proxy_error']
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

/** Also takes `range=hour|day|7d|30d|all` in place of `from` (the list's time filter). */
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
  const outcome = get(q, 'outcome')
  if (outcome !== null && !OUTCOMES.includes(outcome)) throw bad('outcome')
  const keyId = get(q, 'key')
  if (keyId !== null && !UUID.test(keyId)) throw bad('key')
  const user = label(q, 'user', MAX_USER)
  const session = label(q, 'session', MAX_SESSION)
  const tag = label(q, 'tag', MAX_TAG)
  const text = get(q, 'q')
  if (text !== null && text.length > 1000) throw bad('q')
  const rawLimit = get(q, 'limit')
  const limit = rawLimit === null ? DEFAULT_LIMIT : /^\d{1,4}$/.test(rawLimit) ? Number(rawLimit) : NaN
  if (!(limit >= 1 && limit <= MAX_LIMIT)) throw bad('limit')
  const cursor = get(q, 'cursor')
  return {
    accountId,
    from,
    to,
    provider,
    model,
    outcome,
    keyId: keyId?.toLowerCase() ?? null,
    user,
    session,
    tag,
    q: text,
    limit,
    cursor: cursor === null ? null : decodeCursor(cursor),
  }
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
  const keyId = get(q, 'key')
  if (keyId !== null && !UUID.test(keyId)) throw bad('key')
  const user = label(q, 'user', MAX_USER)
  const usersBy = get(q, 'users_by') ?? 'requests'
  if (usersBy !== 'requests' && usersBy !== 'cost') throw bad('users_by')
  return { keyId: keyId?.toLowerCase() ?? null, user, usersBy }
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
