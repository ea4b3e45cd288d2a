// Turns what the front thread handed over into a trace row: texts capped with truncated flags, tokens
// from the provider's usage (or estimated), time to first token, and cost. Confidential calls keep
// their counts and timings and nothing of their text.
import type { Pricing } from '../pricing/index.js'
import { chTime } from './connect.js'
import { estimateTokens } from './tokens.js'
import type { RawTrace } from './trace-types.js'
import { promptText, readResponse } from './usage.js'

export interface TraceRow {
  account_id: string
  time: string
  trace_id: string
  key_id: string
  provider: string
  model: string
  endpoint: string
  streaming: boolean
  confidential: boolean
  status: number
  outcome: string
  error_code: string
  prompt: string
  prompt_truncated: boolean
  response: string
  response_truncated: boolean
  request_bytes: number
  response_bytes: number
  input_tokens: number
  output_tokens: number
  cached_input_tokens: number
  token_source: 'provider' | 'estimated' | 'none'
  latency_ms: number
  ttfb_ms: number | null
  ttft_ms: number | null
  provider_ms: number | null
  overhead_ms: number
  cost_usd: number | null
  cost_status: 'priced' | 'unknown_model' | 'not_called'
  detection: string
  issues: string
}

/** The arrival time of the chunk holding byte `offset` of the response. */
function chunkTime (marks: readonly number[], offset: number): number | null {
  for (let i = 0; i < marks.length; i += 2) if (marks[i]! >= offset) return marks[i + 1]!
  return null
}

export function buildRow (raw: RawTrace, pricing: Pricing): TraceRow {
  const bytes = Buffer.from(raw.bytes.buffer, raw.bytes.byteOffset, raw.bytes.byteLength)
  const reqEnd = raw.requestLength
  const headEnd = reqEnd + raw.headLength
  const request = bytes.toString('utf8', 0, reqEnd)
  const head = bytes.subarray(reqEnd, headEnd)
  const tail = bytes.subarray(headEnd)
  const whole = raw.responseBytes <= head.length + tail.length
  const called = raw.providerMs !== null
  const p = raw.provider

  // Usage sits at the end of a stream (beta puts its input side at the start): read the whole answer
  // when it was kept; else the kept head and tail, the tail's counts winning where it has them.
  const headText = head.toString('utf8')
  let reading: ReturnType<typeof readResponse> | null = null
  if (called) {
    if (whole) {
      reading = readResponse(p, raw.streaming, tail.length === 0 ? headText : Buffer.concat([head, tail]).toString('utf8'))
    } else {
      const first = readResponse(p, raw.streaming, headText)
      const last = readResponse(p, raw.streaming, tail.toString('utf8'))
      const usage = first.usage === null && last.usage === null
        ? null
        : {
            input: last.usage?.input || first.usage?.input || 0,
            output: last.usage?.output || first.usage?.output || 0,
            cached: last.usage?.cached || first.usage?.cached || 0,
          }
      reading = { usage, text: first.text, firstTokenEnd: first.firstTokenEnd }
    }
  }
  let input = 0
  let output = 0
  let cached = 0
  let source: TraceRow['token_source'] = 'none'
  if (reading !== null) {
    if (reading.usage !== null) {
      ({ input, output, cached } = reading.usage)
      source = 'provider'
    }
    // No usage from an answer that was generating (a stream without include_usage, a cut, a client
    // that left): count what we have. An error answer generated nothing, so nothing is estimated.
    const generating = raw.status > 0 && raw.status < 400
    const cut = raw.streaming && raw.outcome !== 'ok'
    if (generating && (reading.usage === null || cut)) {
      if (input === 0) input = estimateTokens(promptText(p, request))
      const estimate = estimateTokens(reading.text)
      if (estimate > output) output = estimate
      if (reading.usage === null || estimate === output) source = 'estimated'
    }
  }

  let ttft: number | null = null
  if (raw.streaming && raw.chunkMarks !== null && called) {
    const first = whole ? reading?.firstTokenEnd ?? null : readResponse(p, true, headText).firstTokenEnd
    if (first !== null) {
      const at = chunkTime(raw.chunkMarks, Buffer.byteLength((whole ? Buffer.concat([head, tail]).toString('utf8') : headText).slice(0, first)))
      ttft = at === null ? null : Math.round(at * 1000) / 1000
    }
  }

  const { costUsd, status } = called
    ? pricing.cost(p, raw.model, { input, output, cached })
    : { costUsd: 0, status: 'not_called' as const }

  const confidential = raw.confidential
  return {
    account_id: raw.accountId,
    time: chTime(raw.time),
    trace_id: raw.traceId,
    key_id: raw.keyId,
    provider: p,
    model: raw.model,
    endpoint: raw.endpoint,
    streaming: raw.streaming,
    confidential,
    status: raw.status,
    outcome: raw.outcome,
    error_code: raw.errorCode,
    prompt: confidential ? '' : request,
    prompt_truncated: !confidential && raw.requestBytes > raw.requestLength,
    response: confidential ? '' : headText,
    response_truncated: !confidential && raw.responseBytes > raw.headLength,
    request_bytes: raw.requestBytes,
    response_bytes: raw.responseBytes,
    input_tokens: input,
    output_tokens: output,
    cached_input_tokens: cached,
    token_source: source,
    latency_ms: raw.latencyMs,
    ttfb_ms: raw.ttfbMs,
    ttft_ms: ttft,
    provider_ms: raw.providerMs,
    overhead_ms: raw.overheadMs,
    cost_usd: costUsd,
    cost_status: status,
    detection: confidential ? '' : raw.detection,
    issues: confidential ? '' : raw.issues,
  }
}
