// The limits on a front thread (TRACEGATE_THREADS above 1). The counts live in the main thread's Limiter,
// so N threads admit what one would. A call whose key and account are on the board (board.ts) is judged
// here: its requests per minute counted there, and what it may cost (tokens, spend) held there while the
// minute's tokens and the day's and month's spend, as the main thread counts them, leave room. The main
// thread puts a key and account there when it first counts one of their calls; until then, and for limits
// the board cannot hold, a call under a counted limit asks the main thread, which judges and counts it in
// one step. A call with no counted limit is judged here (the models and body limits need no count,
// rules.ts) and only counted there, for the dashboard's use figures (no limit depends on it, so it need not
// wake the main thread every turn): the counts ride with the thread's next trace batch, whose store worker
// report wakes the main thread anyway, or go in a note of their own when no batch took them within
// NOTE_MS. A call admitted on the board is in the same counts with 0 (it is counted on the board), so the
// main thread keeps its subjects current.
// What a call held here rides with its trace to the store worker, whose report of the built trace tells
// the main thread its real cost first and then lets the hold go, so the two never leave a gap.
import type { LimitsMode } from '../domain/limits-mode.js'
import type { Pricing } from '../pricing/index.js'
import { dayOf, epochOf, minuteOf, monthOf, type RequestBoard } from './board.js'
import { boardable, holdLimits, limitHeaders, overBudgetRefusal, priceHold, rateLimitedRefusal, rpmAlone, type LimitCall } from './limiter.js'
import { Windows } from './shared.js'
import { checkRules, hasCounters, type Refusal } from './rules.js'
import type { Limits } from '../domain/limits.js'
import type { AdmittedCount } from '../store/trace-types.js'

const NOTE_MS = 100
const MINUTE_MS = 60_000

/** Requests admitted here, per key: told to the main thread's counts (0: counted on the board). */
export type CountedNote = readonly AdmittedCount[]

/** How a front thread reaches the main thread's counts: a judged-and-counted call, and a note of calls admitted here. */
export interface MainCounts {
  admit (call: LimitCall): Promise<Refusal | null>
  counted (note: CountedNote): void
}

/** What the board judges with beyond the counts: the prices of holds under a budget, and whether calls hold at all. */
export interface FrontHolds {
  /** Prices a call's hold under a budget; null: no hold in USD (the main thread's Limiter has the same). */
  readonly pricing: Pricing | null
  /** Hold each call's estimate until its trace is built (traces on). */
  readonly hold: boolean
}

export class FrontLimits {
  readonly #main: MainCounts
  readonly #board: RequestBoard | null
  readonly #now: () => number
  readonly #holds: FrontHolds
  #counted = new Map<string, [string, string, number]>()
  #timer: NodeJS.Timeout | null = null
  /** The main thread's mode, as its last readiness answer said. */
  mode: LimitsMode = 'local'
  /** Tells the main thread what is counted and not yet told. */
  readonly #send = (): void => {
    const note = this.takeCounted()
    if (note !== null) this.#main.counted(note)
  }

  /**
   * `board`: the main thread's request board (null: every call under a counted limit asks the main thread);
   * `now`: the clock its minutes follow (the main thread's Limiter must follow the same one); `holds`: as
   * the main thread's Limiter prices and holds.
   */
  constructor (main: MainCounts, board: RequestBoard | null = null, now: () => number = Date.now, holds: FrontHolds = { pricing: null, hold: false }) {
    this.#main = main
    this.#board = board
    this.#now = now
    this.#holds = holds
  }

  /** null = admitted; a promise when the main thread's counts decide. */
  admit (call: LimitCall, model: string | null, bodyBytes: number): Refusal | null | Promise<Refusal | null> {
    const refused = checkRules(call.key, call.account, model, bodyBytes)
    if (refused !== null) return refused
    if (hasCounters(call.key) || hasCounters(call.account)) {
      const judged = this.#board !== null && boardable(call.key) && boardable(call.account)
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

  /** What is counted and not yet told, for the caller to carry to the main thread (null: nothing). */
  takeCounted (): AdmittedCount[] | null {
    if (this.#timer === null) return null
    clearTimeout(this.#timer)
    this.#timer = null
    const taken = [...this.#counted.values()]
    this.#counted = new Map()
    return taken
  }

  /** Sends what is counted and not yet told. */
  close (): void {
    this.#send()
  }

  /**
   * The board's verdict on the call (undefined when its key or account is not on it): its request counted
   * and, under a tpm or budget, its estimate held (told to the caller through `call.held`). A refusal
   * takes back what the call had counted and held.
   */
  #onBoard (board: RequestBoard, call: LimitCall): Refusal | null | undefined {
    const k = board.find('key', call.keyId)
    const a = k < 0 ? -1 : board.find('account', call.accountId)
    if (a < 0) return undefined
    const { key, account } = call
    const counted = call.relay !== true && !(rpmAlone(key) && rpmAlone(account))
    // As the main thread: under a budget a call must have a price before anything is counted.
    const price = priceHold(call, this.#holds.pricing)
    if (typeof price !== 'number') return price
    const now = this.#now()
    const minute = minuteOf(now)
    const byKey = board.admit(k, minute, key.rpm)
    if (byKey < 0) return this.#refused(board, call, k, a, now, `The key's limit of ${key.rpm!} requests per minute`)
    const byAccount = board.admit(a, minute, account.rpm)
    if (byAccount < 0) {
      board.undo(k, minute)
      return this.#refused(board, call, k, a, now, `The account's limit of ${account.rpm!} requests per minute`)
    }
    if (!counted) return null
    const est = call.estimate
    const held = call.held
    const holding = this.#holds.hold && call.callId !== undefined && held !== undefined
    const tok = holding && est !== undefined && (key.tpm !== null || account.tpm !== null) ? est.promptTokens + est.outputTokens : 0
    const micro = holding ? price : 0
    const epoch = epochOf(now)
    const refused = board.holdBoth(k, a, holdLimits(key), holdLimits(account), { minute, day: dayOf(now), month: monthOf(now), epoch }, tok, micro)
    if (refused !== null) {
      // Taken back before the refusal is written, so its headers count what the main thread's would.
      board.undo(k, minute)
      board.undo(a, minute)
      return refused.limit === 'tpm'
        ? this.#refused(board, call, k, a, now, `The ${refused.whose}'s limit of ${(refused.whose === 'key' ? key : account).tpm!} tokens per minute`)
        : this.#overBudget(board, call, k, a, now, minute, refused.whose, refused.limit, refused.whose === 'key' ? key : account)
    }
    if (held !== undefined) { held.tok = tok; held.micro = micro; held.epoch = epoch }
    return null
  }

  #overBudget (board: RequestBoard, call: LimitCall, k: number, a: number, now: number, minute: number, whose: 'key' | 'account', period: 'day' | 'month', limits: Limits): Refusal {
    const w = new Windows()
    w.refresh(now)
    const wait = (period === 'day' ? w.dayEnd : w.monthEnd) - now
    return overBudgetRefusal(whose, period, (period === 'day' ? limits.budgetDayUsd : limits.budgetMonthUsd)!, wait, this.#headers(board, call, k, a, now, minute, wait))
  }

  #refused (board: RequestBoard, call: LimitCall, k: number, a: number, now: number, what: string): Refusal {
    const wait = MINUTE_MS - (now % MINUTE_MS)
    return rateLimitedRefusal(what, wait, this.#headers(board, call, k, a, now, minuteOf(now), wait))
  }

  /** The 429 headers from the board's counts of the minute (a refused call has taken back its own request). */
  #headers (board: RequestBoard, call: LimitCall, k: number, a: number, now: number, minute: number, wait: number): Record<string, string> {
    const counts = {
      keyRequests: board.count(k, minute) + board.other(k, minute),
      accountRequests: board.count(a, minute) + board.other(a, minute),
      keyTokens: board.tokens(k, minute),
      accountTokens: board.tokens(a, minute),
    }
    return limitHeaders(call.key, call.account, counts, MINUTE_MS - (now % MINUTE_MS), wait)
  }

  #note (call: LimitCall, n: number): void {
    const seen = this.#counted.get(call.keyId)
    if (seen !== undefined) seen[2] += n
    else this.#counted.set(call.keyId, [call.keyId, call.accountId, n])
    this.#timer ??= setTimeout(this.#send, NOTE_MS)
  }
}
