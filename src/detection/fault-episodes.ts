// Detection faults in the log without flooding it: the first failure of an episode is logged with its
// cause, the ones after it only counted, and the first answer after them ends the episode with the count.
// Under a crashing worker or a saturated pool that is two lines, not one per request.
import type { DetectionOutcome } from './pool.js'

export type FaultLog = (msg: string, fields: Record<string, unknown>) => void

export class FaultEpisodes {
  readonly #log: FaultLog
  /** Requests that could not be judged since the episode began; 0 while detection answers. */
  #failed = 0

  constructor (log: FaultLog) {
    this.#log = log
  }

  /** Told every outcome; `cause` says why one could not be judged. */
  judged (outcome: DetectionOutcome, cause: () => string): void {
    if (outcome.ok) {
      if (this.#failed === 0) return
      this.#log('detection judges requests again', { failed: this.#failed })
      this.#failed = 0
      return
    }
    if (this.#failed++ === 0) this.#log('detection failing', { failure: outcome.failure, cause: cause() })
  }
}
