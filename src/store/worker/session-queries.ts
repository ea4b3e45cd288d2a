// Sessions: the calls that share the caller's `session` label, read from the traces table. Every query
// is filtered by the caller's account; the list is bounded by its time window (the primary key reads only
// that account's granules of it), and one session's calls are found through the session bloom filter
// (session_idx), which skips every granule that cannot hold that id. Every value is a query parameter.
import type { ClickHouseClient } from '@clickhouse/client'
import type { SessionCall, SessionSummary } from '../insight-types.js'
import type { CallCursor, SessionCalls, SessionCallsQuery, SessionCursor, SessionListFilter, SessionPage } from '../query-types.js'
import { chTime } from './connect.js'
import { ERROR_OUTCOMES_SQL } from './usage-rollup.js'

/** How much of a call's last message and of its response a session page carries. */
export const EXCERPT_BYTES = 65_536

// Errors are the outcomes the usage rollup counts as errors. The first user is aliased apart from the column, which the next aggregate reads.
// Unpriced calls (no cost_usd) add nothing to the cost and are counted apart; the column is named with its
// table because, bare, it would be this SELECT's cost_usd alias.
const SUMMARY = `argMinIf(user, time, user != '') AS first_user, uniqExactIf(user, user != '') AS users,
  min(time) AS first_time, max(time) AS last_time, count() AS calls,
  countIf(outcome IN ${ERROR_OUTCOMES_SQL}) AS errors,
  countIf(outcome = 'blocked') AS blocked,
  sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
  sum(cached_input_tokens) AS cached_input_tokens, sum(ifNull(cost_usd, 0)) AS cost_usd,
  countIf(isNull(traces.cost_usd)) AS unpriced_calls,
  round(max(toUnixTimestamp64Milli(time) + latency_ms) - toUnixTimestamp64Milli(min(time)), 3) AS duration_ms`

type SummaryRaw = Omit<SessionSummary, 'calls' | 'errors' | 'blocked' | 'input_tokens' | 'output_tokens' | 'cached_input_tokens' | 'unpriced_calls' | 'users'> & Record<string, unknown>

function summary (r: SummaryRaw): SessionSummary {
  return {
    session: String(r.session),
    user: String(r.first_user ?? ''),
    users: Number(r.users ?? 0),
    first_time: String(r.first_time),
    last_time: String(r.last_time),
    calls: Number(r.calls ?? 0),
    errors: Number(r.errors ?? 0),
    blocked: Number(r.blocked ?? 0),
    input_tokens: Number(r.input_tokens ?? 0),
    output_tokens: Number(r.output_tokens ?? 0),
    cached_input_tokens: Number(r.cached_input_tokens ?? 0),
    cost_usd: Number(r.cost_usd ?? 0),
    unpriced_calls: Number(r.unpriced_calls ?? 0),
    duration_ms: Math.max(0, Number(r.duration_ms ?? 0)),
  }
}

/** Sessions with a call in the window, the most recently active first, keyset pages on (last_time, id). */
export async function listSessions (ch: ClickHouseClient, f: SessionListFilter): Promise<SessionPage> {
  const parts = ["account_id = {accountId:UUID}", "time >= {from:DateTime64(3, 'UTC')}", "time < {to:DateTime64(3, 'UTC')}", "session != ''"]
  const params: Record<string, unknown> = { accountId: f.accountId, from: chTime(f.from), to: chTime(f.to), limit: f.limit + 1 }
  if (f.user !== null) {
    parts.push('user = {user:String}')
    params.user = f.user
  }
  let having = ''
  if (f.cursor !== null) {
    having = "HAVING last_time < {cursorLast:DateTime64(3, 'UTC')} OR (last_time = {cursorLast:DateTime64(3, 'UTC')} AND session < {cursorSession:String})"
    params.cursorLast = f.cursor.last
    params.cursorSession = f.cursor.session
  }
  const rs = await ch.query({
    query: `SELECT session, ${SUMMARY} FROM traces WHERE ${parts.join(' AND ')}
      GROUP BY session ${having} ORDER BY last_time DESC, session DESC LIMIT {limit:UInt32}`,
    query_params: params,
    format: 'JSONEachRow',
  })
  const rows = (await rs.json<SummaryRaw>()).map(summary)
  const more = rows.length > f.limit
  const sessions = more ? rows.slice(0, f.limit) : rows
  const last = sessions[sessions.length - 1]
  return { sessions, next: more && last !== undefined ? { last: last.last_time, session: last.session } : null }
}

// The list item's columns (trace-types.ts TraceSummary), then what the conversation view shows.
const CALL_COLUMNS = `account_id, trace_id, time, key_id, provider, model, streaming, confidential, status,
  outcome, error_code, input_tokens, output_tokens, cached_input_tokens, token_source, latency_ms, cost_usd,
  user, session, tags, ttfb_ms`

/**
 * The request's last message as a one-message body of the same dialect, whichever name its message list
 * has (`messages`: alpha and beta; `contents`: gamma; `input`: the Responses API and embeddings, a string
 * kept whole). JSONExtractRaw answers '' for a body that is cut or not JSON, and the message is left out
 * past EXCERPT_BYTES.
 */
const INPUT = `if(confidential, '', multiIf(
    JSONHas(prompt, 'contents'), concat('{"contents":[', JSONExtractRaw(prompt, 'contents', -1), ']}'),
    JSONHas(prompt, 'messages'), concat('{"messages":[', JSONExtractRaw(prompt, 'messages', -1), ']}'),
    JSONType(prompt, 'input') = 'Array', concat('{"input":[', JSONExtractRaw(prompt, 'input', -1), ']}'),
    JSONType(prompt, 'input') = 'String', concat('{"input":', JSONExtractRaw(prompt, 'input'), '}'),
    ''))`

/** One session's totals and a page of its calls, oldest first (keyset pages on time, trace id). */
export async function sessionCalls (ch: ClickHouseClient, q: SessionCallsQuery): Promise<SessionCalls> {
  const base = { accountId: q.accountId, session: q.session }
  const totalsQuery = ch.query({
    // No alias named like a column here: ClickHouse would read the alias in the WHERE clause.
    query: `SELECT ${SUMMARY} FROM traces
      WHERE account_id = {accountId:UUID} AND session = {session:String}`,
    query_params: base,
    format: 'JSONEachRow',
  })
  const after = q.cursor === null
    ? ''
    : ` AND time >= {cursorTime:DateTime64(3, 'UTC')}
        AND (time > {cursorTime:DateTime64(3, 'UTC')} OR trace_id > {cursorId:UUID})`
  const callsQuery = ch.query({
    query: `SELECT ${CALL_COLUMNS},
        ${INPUT} AS input_body,
        if(length(input_body) > {excerpt:UInt32}, '', input_body) AS input,
        substring(response, 1, {excerpt:UInt32}) AS output,
        response_truncated OR length(response) > {excerpt:UInt32} AS output_cut
      FROM traces
      WHERE account_id = {accountId:UUID} AND session = {session:String}${after}
      ORDER BY time, trace_id LIMIT {limit:UInt32}`,
    query_params: {
      ...base,
      excerpt: EXCERPT_BYTES,
      limit: q.limit + 1,
      ...(q.cursor === null ? {} : { cursorTime: q.cursor.time, cursorId: q.cursor.traceId }),
    },
    format: 'JSONEachRow',
  })
  const [totalsRows, callRows] = await Promise.all([
    totalsQuery.then((rs) => rs.json<SummaryRaw>()),
    callsQuery.then((rs) => rs.json<SessionCall & { input_body?: string }>()),
  ])
  const t = totalsRows[0]
  const totals = t === undefined || Number(t.calls ?? 0) === 0 ? null : summary({ ...t, session: q.session })
  const more = callRows.length > q.limit
  const page = more ? callRows.slice(0, q.limit) : callRows
  const calls = page.map(({ input_body: _body, ...c }) => ({ ...c, blocked: c.outcome === 'blocked' }))
  const last = calls[calls.length - 1]
  return { totals, calls, next: more && last !== undefined ? { time: last.time, traceId: last.trace_id } : null }
}
