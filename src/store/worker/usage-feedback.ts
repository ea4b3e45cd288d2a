// Tokens and cost of the rows just built, sent back to the front thread for the per-key limits (tokens per
// minute, spend budgets): they are known only once the answer has been read, which happens here. Summed
// per key and minute within a batch, so a message carries one entry per key a batch touched.
import type { RawTrace, TraceSummary, UsageFeedback } from '../trace-types.js'

export class UsageCollector {
  readonly #by = new Map<string, UsageFeedback>()

  /** A built row; a row with neither tokens nor cost changes no limit and is skipped. */
  add (raw: RawTrace, row: TraceSummary | null): void {
    if (row === null || raw.keyId === '') return
    const tokens = row.input_tokens + row.output_tokens
    const cost = row.cost_usd ?? 0
    if (tokens === 0 && cost === 0) return
    // When the tokens were spent: the call's end.
    const at = raw.time + raw.latencyMs
    const minute = Math.floor(at / 60_000)
    const k = raw.keyId + ' ' + minute
    const e = this.#by.get(k)
    if (e === undefined) this.#by.set(k, { keyId: raw.keyId, accountId: raw.accountId, atMs: at, tokens, costUsd: cost })
    else {
      e.tokens += tokens
      e.costUsd += cost
    }
  }

  /** What was collected since the last call (null when nothing), and a fresh start. */
  take (): UsageFeedback[] | null {
    if (this.#by.size === 0) return null
    const out = [...this.#by.values()]
    this.#by.clear()
    return out
  }
}
