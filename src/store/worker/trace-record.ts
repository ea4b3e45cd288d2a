// One trace as the store worker builds it from a finished exchange (rows.ts) and writes it as a row of the
// traces table; PII-at-rest masking (pii-at-rest.ts) takes and returns one. Type-only, so the modules that
// build, mask and encode a record need not import each other for it.
import type { TraceRow, TraceSummary } from '../trace-types.js'

/** A built trace, waiting in the writer's queue: what the live list shows, and the rest of the row. */
export interface TraceRecord {
  readonly summary: TraceSummary
  readonly endpoint: string
  readonly prompt: Uint8Array
  readonly promptTruncated: boolean
  readonly response: Uint8Array
  readonly responseTruncated: boolean
  readonly requestBytes: number
  readonly responseBytes: number
  readonly ttfbMs: number | null
  readonly ttftMs: number | null
  readonly providerMs: number | null
  readonly overheadMs: number
  readonly costStatus: TraceRow['cost_status']
  readonly errorCause: string
  /** The attempts' JSON, or '' (trace-types.ts RawTrace). */
  readonly attempts: string
  /** TraceRow's `cache` and `cost_saved_usd`. */
  readonly cache: TraceRow['cache']
  readonly costSavedUsd: number | null
  readonly detection: string
  readonly issues: string
  /** The caller sent labels (else user, session, tags and metadata are all empty). */
  readonly labelled: boolean
  /** The caller's metadata (its user, session and tags are in the summary). */
  readonly metadata: Readonly<Record<string, string>>
}
