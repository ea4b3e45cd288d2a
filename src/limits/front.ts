// The limits on a front thread (TRACEGATE_THREADS above 1). The counts live in the main thread's Limiter,
// so N threads admit what one would: a call whose key or account has a counted limit (requests, tokens,
// spend) asks the main thread, which judges and counts it in one step; any other call is judged here (the
// models and body limits need no count, rules.ts) and only counted there, for the dashboard's use figures,
// in a note sent every NOTE_MS (no limit depends on it, so it need not wake the main thread every turn).
import type { LimitsMode } from '../domain/limits-mode.js'
import type { LimitCall } from './limiter.js'
import { checkRules, hasCounters, type Refusal } from './rules.js'

const NOTE_MS = 100

/** Requests admitted here for one key: told to the main thread's counts. */
export type CountedNote = ReadonlyArray<readonly [keyId: string, accountId: string, n: number]>

/** How a front thread reaches the main thread's counts: a judged-and-counted call, and a note of calls admitted here. */
export interface MainCounts {
  admit (call: LimitCall): Promise<Refusal | null>
  counted (note: CountedNote): void
}

export class FrontLimits {
  readonly #main: MainCounts
  #counted = new Map<string, [string, string, number]>()
  #timer: NodeJS.Timeout | null = null
  /** The main thread's mode, as its last readiness answer said. */
  mode: LimitsMode = 'local'
  readonly #send = (): void => {
    this.#timer = null
    const note: CountedNote = [...this.#counted.values()]
    this.#counted = new Map()
    this.#main.counted(note)
  }

  constructor (main: MainCounts) {
    this.#main = main
  }

  /** null = admitted; a promise when the main thread's counts decide. */
  admit (call: LimitCall, model: string | null, bodyBytes: number): Refusal | null | Promise<Refusal | null> {
    const refused = checkRules(call.key, call.account, model, bodyBytes)
    if (refused !== null) return refused
    if (hasCounters(call.key) || hasCounters(call.account)) return this.#main.admit(call)
    const seen = this.#counted.get(call.keyId)
    if (seen !== undefined) seen[2]++
    else this.#counted.set(call.keyId, [call.keyId, call.accountId, 1])
    this.#timer ??= setTimeout(this.#send, NOTE_MS)
    return null
  }

  /** Sends what is counted and not yet told. */
  close (): void {
    if (this.#timer !== null) { clearTimeout(this.#timer); this.#send() }
  }
}
