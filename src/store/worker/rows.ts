// Turns what the front thread handed over into a trace record: texts capped with truncated flags,
// tokens from the provider's usage (or estimated), time to first token, and cost. Confidential calls
// keep their counts and timings and nothing of their text. Prompt and response stay UTF-8 bytes (views
// on the buffer the front thread transferred) until they are escaped into the insert batch.
import { isUtf8 } from 'node:buffer'
import type { Pricing } from '../../pricing/index.js'
import { estimateTokens } from './tokens.js'
import type { CallLabels, RawTrace, TraceRow, TraceSummary } from '../trace-types.js'
import { TsvWriter, utf8End } from './tsv.js'
import { promptText, readResponse } from './token-usage.js'
import { maskRecord } from './pii-at-rest.js'
import { issuesOnScrubbed, withoutTracegateKeys } from './key-scrub.js'
import type { TraceRecord } from './trace-record.js'

/**
 * The columns rows were written with before the caller's labels (migration 005): batches spooled by that
 * version hold exactly these, in this order, and are inserted naming them (the labels take their defaults).
 */
export const TRACE_COLUMNS_BEFORE_LABELS: readonly string[] = [
  'account_id', 'time', 'trace_id', 'key_id', 'provider', 'model', 'endpoint', 'streaming', 'confidential',
  'status', 'outcome', 'error_code', 'error_cause', 'prompt', 'prompt_truncated', 'response', 'response_truncated',
  'request_bytes', 'response_bytes', 'input_tokens', 'output_tokens', 'cached_input_tokens', 'token_source',
  'latency_ms', 'ttfb_ms', 'ttft_ms', 'provider_ms', 'overhead_ms', 'cost_usd', 'cost_status', 'detection', 'issues',
]

/** The traces table's columns in the order `encodeRecord` writes them. */
export const TRACE_COLUMNS: readonly string[] = [...TRACE_COLUMNS_BEFORE_LABELS, 'user', 'session', 'tags', 'metadata', 'attempts', 'cache', 'cost_saved_usd']

/** user, session, tags and metadata of a call without labels: '', '', [] and {} in one write. */
const NO_LABEL_FIELDS = '\t\t[]\t{}'

export function encodeRecord (w: TsvWriter, r: TraceRecord): void {
  const s = r.summary
  w.string(s.account_id).string(s.time).string(s.trace_id).string(s.key_id).string(s.provider).string(s.model)
    .string(r.endpoint).bool(s.streaming).bool(s.confidential).number(s.status).string(s.outcome).string(s.error_code)
    .string(r.errorCause).bytes(r.prompt).bool(r.promptTruncated).bytes(r.response).bool(r.responseTruncated)
    .number(r.requestBytes).number(r.responseBytes).number(s.input_tokens).number(s.output_tokens)
    .number(s.cached_input_tokens).string(s.token_source).number(s.latency_ms).number(r.ttfbMs).number(r.ttftMs)
    .number(r.providerMs).number(r.overheadMs).number(s.cost_usd).string(r.costStatus).string(r.detection)
    .string(r.issues)
  if (r.labelled) w.string(s.user).string(s.session).strings(s.tags).map(r.metadata)
  else w.fields(NO_LABEL_FIELDS)
  w.string(r.attempts).string(r.cache).number(r.costSavedUsd)
  w.endRow()
}

const EMPTY = new Uint8Array(0)
const NO_LABELS: CallLabels = Object.freeze({ user: '', session: '', tags: Object.freeze([]), metadata: Object.freeze({}) })

/**
 * The stored form of a captured text: whole characters only (a capture limit can cut one), and valid
 * UTF-8 (a provider may send anything; such text is stored with replacement characters).
 */
function storedText (bytes: Uint8Array): Uint8Array {
  const whole = bytes.subarray(0, utf8End(bytes, bytes.length))
  return isUtf8(whole) ? whole : Buffer.from(Buffer.from(whole).toString('utf8'))
}

let timeSecond = -1
let timePrefix = ''
/** ClickHouse's DateTime64(3) text form in UTC, with the date part kept per second (rows come in runs). */
function rowTime (ms: number): string {
  const second = Math.floor(ms / 1000)
  if (second !== timeSecond) {
    timeSecond = second
    timePrefix = new Date(second * 1000).toISOString().slice(0, 19).replace('T', ' ')
  }
  const frac = ms - second * 1000
  return `${timePrefix}.${frac < 10 ? '00' : frac < 100 ? '0' : ''}${Math.floor(frac)}`
}

/** The arrival time of the chunk holding byte `offset` of the response. */
function chunkTime (marks: readonly number[], offset: number): number | null {
  for (let i = 0; i < marks.length; i += 2) if (marks[i]! >= offset) return marks[i + 1]!
  return null
}

/** The captured response of a trace: its head, its tail, and whether together they are the whole answer. */
interface Captured {
  readonly bytes: Buffer
  readonly reqEnd: number
  readonly head: Buffer
  readonly tail: Buffer
  readonly whole: boolean
}

function captured (raw: RawTrace): Captured {
  const bytes = Buffer.from(raw.bytes.buffer, raw.bytes.byteOffset, raw.bytes.byteLength)
  const reqEnd = raw.requestLength
  const headEnd = reqEnd + raw.headLength
  const head = bytes.subarray(reqEnd, headEnd)
  const tail = bytes.subarray(headEnd)
  return { bytes, reqEnd, head, tail, whole: raw.responseBytes <= head.length + tail.length }
}

type Reading = ReturnType<typeof readResponse>

/**
 * What the answer says: usage sits at the end of a stream (beta puts its input side at the start), so the
 * whole answer is read when it was kept; else the kept head and tail, the tail's counts winning.
 */
function readAnswer (raw: RawTrace, c: Captured): Reading {
  const p = raw.provider
  if (c.whole) return readResponse(p, raw.streaming, c.tail.length === 0 ? c.head : Buffer.concat([c.head, c.tail]))
  const first = readResponse(p, raw.streaming, c.head)
  const last = readResponse(p, raw.streaming, c.tail)
  const usage = first.usage === null && last.usage === null
    ? null
    : {
        input: last.usage?.input || first.usage?.input || 0,
        output: last.usage?.output || first.usage?.output || 0,
        cached: last.usage?.cached || first.usage?.cached || 0,
        cacheWrite: last.usage?.cacheWrite || first.usage?.cacheWrite || 0,
      }
  return { usage, text: first.text, firstTokenEnd: first.firstTokenEnd }
}

interface Tokens { input: number; output: number; cached: number; cacheWrite: number; source: TraceRow['token_source'] }

/**
 * The provider's counts when it sent them. An answer that was generating without them (a stream without
 * include_usage, a cut, a client that left) is counted with the tokenizer; an error answer generated
 * nothing, so nothing is estimated.
 */
function countTokens (raw: RawTrace, c: Captured, reading: Reading | null): Tokens {
  const t: Tokens = { input: 0, output: 0, cached: 0, cacheWrite: 0, source: 'none' }
  if (reading === null) return t
  if (reading.usage !== null) {
    t.input = reading.usage.input
    t.output = reading.usage.output
    t.cached = reading.usage.cached
    t.cacheWrite = reading.usage.cacheWrite
    t.source = 'provider'
  }
  const generating = raw.status > 0 && raw.status < 400
  const cut = raw.streaming && raw.outcome !== 'ok'
  if (generating && (reading.usage === null || cut)) {
    if (t.input === 0) t.input = estimateTokens(promptText(raw.provider, c.bytes.toString('utf8', 0, c.reqEnd)))
    const estimate = estimateTokens(reading.text())
    if (estimate > t.output) t.output = estimate
    if (reading.usage === null || estimate === t.output) t.source = 'estimated'
  }
  return t
}

/** When the chunk carrying the first generated token arrived (streams only). */
function timeToFirstToken (raw: RawTrace, c: Captured, reading: Reading | null): number | null {
  if (!raw.streaming || raw.chunkMarks === null || reading === null) return null
  const first = c.whole ? reading.firstTokenEnd : readResponse(raw.provider, true, c.head).firstTokenEnd
  if (first === null) return null
  const text = (c.whole ? Buffer.concat([c.head, c.tail]) : c.head).toString('utf8')
  const at = chunkTime(raw.chunkMarks, Buffer.byteLength(text.slice(0, first)))
  return at === null ? null : Math.round(at * 1000) / 1000
}

/** A finished call's row: its answer read, its tokens counted (or estimated), timed and priced. */
export function buildRecord (raw: RawTrace, pricing: Pricing): TraceRecord {
  const c = captured(raw)
  const called = raw.providerMs !== null
  // A cache hit's answer is read as the provider's: its tokens are what it says; it cost nothing.
  const hit = raw.cache === 'hit'
  const p = raw.provider
  const reading = called || hit ? readAnswer(raw, c) : null
  const { input, output, cached, cacheWrite, source } = countTokens(raw, c, reading)
  const ttft = timeToFirstToken(raw, c, reading)
  const { bytes, reqEnd, head } = c

  const priced = called || hit
    ? pricing.cost(p, raw.model, { input, output, cached, cacheWrite }, raw.time)
    : { costUsd: 0, status: 'not_called' as const }
  const costUsd = hit ? 0 : priced.costUsd
  const status = priced.status

  const confidential = raw.confidential
  const sentPrompt = confidential ? EMPTY : storedText(bytes.subarray(0, reqEnd))
  const prompt = confidential ? EMPTY : withoutTracegateKeys(sentPrompt, false)
  // Labels are what the caller says about the call, not its text: a confidential call keeps them.
  const labels = raw.labels ?? NO_LABELS
  const record: TraceRecord = {
    summary: {
      account_id: raw.accountId,
      trace_id: raw.traceId,
      time: rowTime(raw.time),
      key_id: raw.keyId,
      provider: p,
      model: raw.model,
      streaming: raw.streaming,
      confidential,
      status: raw.status,
      outcome: raw.outcome,
      error_code: raw.errorCode,
      input_tokens: input,
      output_tokens: output,
      cached_input_tokens: cached,
      token_source: source,
      latency_ms: raw.latencyMs,
      cost_usd: costUsd,
      user: labels.user,
      session: labels.session,
      tags: labels.tags,
    },
    endpoint: raw.endpoint,
    errorCause: raw.errorCause,
    attempts: raw.attempts,
    cache: raw.cache ?? '',
    costSavedUsd: hit ? priced.costUsd : null,
    prompt,
    promptTruncated: !confidential && raw.requestBytes > raw.requestLength,
    response: confidential ? EMPTY : withoutTracegateKeys(storedText(head), raw.streaming),
    responseTruncated: !confidential && raw.responseBytes > raw.headLength,
    requestBytes: raw.requestBytes,
    responseBytes: raw.responseBytes,
    ttfbMs: raw.ttfbMs,
    ttftMs: ttft,
    providerMs: raw.providerMs,
    overheadMs: raw.overheadMs,
    costStatus: status,
    detection: confidential ? '' : raw.detection,
    issues: confidential ? '' : issuesOnScrubbed(raw.issues, p, sentPrompt, prompt),
    labelled: raw.labels !== null,
    metadata: labels.metadata,
  }
  // The account's PII at rest: masked here, after tokens and timings were read from the text as sent.
  return raw.maskPii === true && !confidential ? maskRecord(record, p, raw.streaming) : record
}
