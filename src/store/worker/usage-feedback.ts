// Tokens and cost of the rows just built, sent back to the front thread for the per-key limits (tokens per
// minute, spend budgets): they are known only once the answer has been read, which happens here. Summed
// per key and minute within a batch, so a message carries one entry per key a batch touched, and the ids of
// the traces built (the limits let go of what each call held in flight once its cost is counted), and what
// the front threads' calls held on the request board, let go by the main thread after it counts the costs,
// and the requests the front threads admitted (summed per key), so one message a report wakes the main
// thread for all of it.
import type { AdmittedCount, HeldRelease, RawTrace, TraceSummary, UsageFeedback, UsageReport } from '../trace-types.js'

export class UsageCollector {
  readonly #by = new Map<string, UsageFeedback>()
  #settled: string[] = []
  #released: HeldRelease[] = []
  #admitted = new Map<string, [string, string, number]>()

  /** A built row (or a trace not stored); a row with neither tokens nor cost changes no count. */
  add (raw: RawTrace, row: TraceSummary | null): void {
    if (raw.keyId === '') return
    this.#settled.push(raw.traceId)
    if (row === null) return
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

  /** A trace batch's holds on the board: reported with its traces' costs, after them. */
  release (held: readonly HeldRelease[]): void {
    for (const h of held) this.#released.push(h)
  }

  /** A front thread's admitted requests, summed per key with the others' until the report. */
  admit (admitted: readonly AdmittedCount[]): void {
    for (const [keyId, accountId, n] of admitted) {
      const e = this.#admitted.get(keyId)
      if (e === undefined) this.#admitted.set(keyId, [keyId, accountId, n])
      else e[2] += n
    }
  }

  /** What was collected since the last call (null when nothing), and a fresh start. */
  take (): UsageReport | null {
    if (this.#settled.length === 0 && this.#released.length === 0 && this.#admitted.size === 0) return null
    const out = { usage: [...this.#by.values()], settled: this.#settled, released: this.#released, admitted: [...this.#admitted.values()] }
    this.#by.clear()
    this.#settled = []
    this.#released = []
    this.#admitted.clear()
    return out
  }
}
