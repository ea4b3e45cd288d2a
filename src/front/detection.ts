// Detection for a front thread: the one piscina pool lives on the main thread, and a front thread's checks
// reach it through the hub. The pool there applies the deadline, the queue bound, the account's fair share
// and the failure outcomes, exactly as for the main thread's own calls; a body crosses once, in a moved copy.
import type { DetectionOutcome } from '../detection/pool.js'
import type { ProviderName } from '../providers/index.js'

export interface DetectArgs {
  readonly provider: ProviderName
  readonly body: Uint8Array
  readonly allow: readonly string[] | null
  /** Whose share of the pool the request is counted against. */
  readonly account: string
}

/** Asks the main thread's pool (the hub's `detect`), the body's bytes moved with it. */
export type AskDetection = (args: DetectArgs, moved: ArrayBuffer) => Promise<DetectionOutcome>

/** What the main thread answers when it cannot be asked (it is closing): the pool's own `error`. */
const UNREACHABLE: DetectionOutcome = Object.freeze({ ok: false, failure: 'error' })

export class DetectionClient {
  readonly #ask: AskDetection

  constructor (ask: AskDetection) {
    this.#ask = ask
  }

  check (provider: ProviderName, body: Buffer, allow: readonly string[] | null = null, account = ''): Promise<DetectionOutcome> {
    // A copy of just these bytes (a Buffer may be a view on a larger pool), moved rather than cloned.
    const copy = new Uint8Array(body)
    const args: DetectArgs = { provider, body: copy, allow, account }
    return this.#ask(args, copy.buffer).catch(() => UNREACHABLE)
  }
}
