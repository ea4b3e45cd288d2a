// The limits on a front thread (TRACEGATE_THREADS above 1). The counts live in the main thread's Limiter,
// so N threads admit what one would. A call whose counted limits are requests per minute alone is judged here against the request board (board.ts), once its key and account
// are on it: the main thread puts them there when it first counts one of their calls. Any other call under a
// counted limit (tokens, spend, or a subject not on the board yet) asks the main thread, which judges and
// counts it in one step. A call with no counted limit is judged here (the models and body limits need no
// count, rules.ts) and only counted there, for the dashboard's use figures, in a note sent every NOTE_MS (no
// limit depends on it, so it need not wake the main thread every turn); a call admitted on the board goes in
// the same note with no count (it is counted on the board), so the main thread keeps its subjects current.
import type { LimitsMode } from '../domain/limits-mode.js'
import { minuteOf, type RequestBoard } from './board.js'
import { limitHeaders, rateLimitedRefusal, rpmAlone, type LimitCall } from './limiter.js'
import { checkRules, hasCounters, type Refusal } from './rules.js'

const NOTE_MS = 100
const MINUTE_MS = 60_000

/** Requests admitted here for one key: told to the main thread's counts (0: counted on the board). */
export type CountedNote = ReadonlyArray<readonly [keyId: string, accountId: string, n: number]>

/** How a front thread reaches the main thread's counts: a judged-and-counted call, and a note of calls admitted here. */
export interface MainCounts {
  admit (call: LimitCall): Promise<Refusal | null>
  counted (note: CountedNote): void
}

export class FrontLimits {
  readonly #main: MainCounts
  readonly #board: RequestBoard | null
  readonly #now: () => number
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

  /**
   * `board`: the main thread's request board (null: every call under a counted limit asks the main thread);
   * `now`: the clock its minutes follow (the main thread's Limiter must follow the same one).
   */
  constructor (main: MainCounts, board: RequestBoard | null = null, now: () => number = Date.now) {
    this.#main = main
    this.#board = board
    this.#now = now
  }

  /** null = admitted; a promise when the main thread's counts decide. */
  admit (call: LimitCall, model: string | null, bodyBytes: number): Refusal | null | Promise<Refusal | null> {
    const refused = checkRules(call.key, call.account, model, bodyBytes)
    if (refused !== null) return refused
    if (hasCounters(call.key) || hasCounters(call.account)) {
      const judged = this.#board !== null && rpmAlone(call.key) && rpmAlone(call.account)
        ? this.#onBoard(this.#board, call)
        : undefined
      if (judged === undefined) return this.#main.admit(call)
      if (judged !== null) return judged
      this.#note(call, 0)
      return null
    }
    this.#note(call, 1)
    return null
  }

  /** Sends what is counted and not yet told. */
  close (): void {
    if (this.#timer !== null) { clearTimeout(this.#timer); this.#send() }
  }

  /** The board's verdict on the call's requests per minute; undefined when its key or account is not on it. */
  #onBoard (board: RequestBoard, call: LimitCall): Refusal | null | undefined {
    const k = board.find('key', call.keyId)
    const a = k < 0 ? -1 : board.find('account', call.accountId)
    if (a < 0) return undefined
    const now = this.#now()
    const minute = minuteOf(now)
    const byKey = board.admit(k, minute, call.key.rpm)
    if (byKey < 0) return this.#refused(call, -byKey - 1, board.count(a, minute) + board.other(a, minute), now, `The key's limit of ${call.key.rpm!} requests per minute`)
    const byAccount = board.admit(a, minute, call.account.rpm)
    if (byAccount < 0) {
      board.undo(k, minute)
      return this.#refused(call, byKey - 1, -byAccount - 1, now, `The account's limit of ${call.account.rpm!} requests per minute`)
    }
    return null
  }

  #refused (call: LimitCall, keyRequests: number, accountRequests: number, now: number, what: string): Refusal {
    const wait = MINUTE_MS - (now % MINUTE_MS)
    return rateLimitedRefusal(what, wait, limitHeaders(call.key, call.account, { keyRequests, accountRequests, keyTokens: 0, accountTokens: 0 }, wait, wait))
  }

  #note (call: LimitCall, n: number): void {
    const seen = this.#counted.get(call.keyId)
    if (seen !== undefined) seen[2] += n
    else this.#counted.set(call.keyId, [call.keyId, call.accountId, n])
    this.#timer ??= setTimeout(this.#send, NOTE_MS)
  }
}
