// How far the stored traces are behind, for the dashboard's banner on every page: asked of the store
// worker at most once a second, whatever the number of pages open.
import type { StoreClient } from '../store/client.js'
import { secondsBehind } from '../store/lag.js'

const FRESH_MS = 1000

export class StoreLag {
  readonly #store: StoreClient
  #at = 0
  #pending: Promise<number | null> | null = null
  #last: number | null = null

  constructor (store: StoreClient) {
    this.#store = store
  }

  /** Seconds the oldest trace not yet in ClickHouse has waited; null when the store did not say. */
  seconds (): Promise<number | null> {
    if (Date.now() - this.#at < FRESH_MS) return Promise.resolve(this.#last)
    this.#pending ??= this.#store.call('traceStats')
      .then((s) => s === null ? null : secondsBehind(s.lag.dashboardMs), () => null)
      .then((v) => { this.#last = v; this.#at = Date.now(); this.#pending = null; return v })
    return this.#pending
  }
}
