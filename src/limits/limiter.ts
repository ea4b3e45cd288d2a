// The per-key limits, judged on the front thread: model allowlist, the key's body size, requests
// and tokens per minute, spend per UTC day and month, for the key and for its account. Fixed windows aligned
// to the clock (minute, UTC day, UTC month): one counter per subject and window, exact in one instance and a
// single INCRBY across instances. admit() is a few Map lookups and compares; it never waits on Redis.
// Each call let through under a budget or tpm holds what it may cost at most (reserve.ts) until its trace
// is built and its real cost counted (settle), so calls in flight count from the moment they pass.
import { performance } from 'node:perf_hooks'
import type { Pricing } from '../pricing/index.js'
import type { ProviderName } from '../providers/index.js'
import type { Estimate } from './reserve.js'
import { checkRules, NO_HEADERS, refusal, type Refusal } from './rules.js'
import { dayOf, epochOf, MAX_DAY_MICRO, MAX_MONTH_MICRO, MAX_TOKENS, minuteOf, monthOf, type BoardKind, type BoardStats, type HoldLimits, type RequestBoard } from './board.js'
import { SharedSync, Subject, Windows, roll, type SharedCounters } from './shared.js'
import { modelMatcher } from './types.js'
import type { LimitUsageRow, Limits } from '../domain/limits.js'
import type { LimitsMode } from '../domain/limits-mode.js'

/** Spend is counted in micro-dollars: budgets have at most 6 decimals, so a comparison is exact. */
const MICRO = 1_000_000
/** Subjects examined per turn of the event loop when the month's sweep runs. */
const SWEEP_CHUNK = 10_000
/** A hold whose trace never came (dropped under overload) is let go this long after the call passed. */
export const HOLD_MAX_MS = 30 * 60_000
const HOLD_SWEEP_MS = 60_000

export interface LimitCall {
  readonly keyId: string
  readonly accountId: string
  readonly key: Limits
  readonly account: Limits
  /** The trace id: the hold is settled when the trace of this id is built. Absent: nothing is held. */
  readonly callId?: string
  readonly provider?: ProviderName
  readonly model?: string | null
  readonly estimate?: Estimate
  /**
   * A relayed call (token counting, reading a stored response): it generates nothing, so it counts one
   * request and is judged by requests per minute alone, never by tokens or spend.
   */
  readonly relay?: boolean
  /**
   * Filled by a front thread that judged the call on the request board: what the call holds there (tokens,
   * whole micro-dollars), which its trace carries to the store worker so the hold ends when it is built.
   */
  readonly held?: BoardHeld
}

/** What a call judged on the request board holds there, and in which quarter hour (board.ts epochOf); 0 and 0 until it is admitted. */
export interface BoardHeld { tok: number; micro: number; epoch: number }

/** What the proxy asks of the limits: the Limiter itself, or a front thread's (front.ts), which may ask the main thread. */
export interface Admission {
  admit (call: LimitCall, model: string | null, bodyBytes: number): Refusal | null | Promise<Refusal | null>
  readonly mode: LimitsMode
}

export interface LimitUsage {
  readonly minuteRequests: number
  readonly minuteTokens: number
  readonly dayUsd: number
  readonly monthUsd: number
  /** When each window ends: epoch ms. */
  readonly minuteResetMs: number
  readonly dayResetMs: number
  readonly monthResetMs: number
}

export interface LimiterOptions {
  readonly now?: () => number
  /** Counters shared with the other instances (Redis); null or absent: this instance's counts only. */
  readonly shared?: SharedCounters | null
  /** How often the shared counters are synced (default 100 ms). */
  readonly syncMs?: number
  /** Told once when the shared counters go away, and once when they are back. */
  readonly warn?: (msg: string, fields: object) => void
  /** Prices each call's hold; a call under a budget whose model it cannot price is refused. Absent: no hold in USD. */
  readonly pricing?: Pricing | null
  /** Hold each call's estimate until settle() (true when built traces report their costs, i.e. traces are on). */
  readonly hold?: boolean
  /**
   * The counts front threads judge counted limits with (board.ts); absent: none. A subject goes on it when
   * it is first counted here under a counted limit; its requests are then counted there, by whichever
   * thread admits them, and added to its own here whenever it is read. Its tokens and spend are counted
   * here and written there; what its calls in flight hold lives there alone.
   */
  readonly board?: RequestBoard | null
}

/** What the calls in flight of one key or account hold. */
interface Held { tok: number; micro: number }

/**
 * One call's hold: key and account by name ('k:' or 'a:' and the id), micro-dollars whole; for each, the
 * quarter hour it is held in on the board, or -1 while it is held in this thread's map.
 */
interface Hold { readonly k: string; readonly a: string; readonly tok: number; readonly micro: number; readonly at: number; kEpoch: number; aEpoch: number }

const budgeted = (l: Limits): boolean => l.budgetDayUsd !== null || l.budgetMonthUsd !== null
/** Only requests per minute are counted under these limits (or none). */
export const rpmAlone = (l: Limits): boolean => l.tpm === null && !budgeted(l)
/** Limits the request board's words can count up to (board.ts): a subject under them is judged on it once it has a slot. */
/** What the board holds a subject's calls against: tokens per minute, budgets in whole micro-dollars. */
export const holdLimits = (l: Limits): HoldLimits => ({
  tpm: l.tpm, dayMicro: l.budgetDayUsd === null ? null : micro(l.budgetDayUsd), monthMicro: l.budgetMonthUsd === null ? null : micro(l.budgetMonthUsd),
})
export const boardable = (l: Limits): boolean => (l.tpm === null || l.tpm <= MAX_TOKENS) &&
  (l.budgetDayUsd === null || micro(l.budgetDayUsd) <= MAX_DAY_MICRO) && (l.budgetMonthUsd === null || micro(l.budgetMonthUsd) <= MAX_MONTH_MICRO)

const requests = (s: Subject): number => s.reqBase + s.reqFly + s.reqOwn
const tokens = (s: Subject): number => s.tokBase + s.tokFly + s.tokOwn
// Spend is compared and shown in whole micro-dollars, so float sums of costs (0.3 + 0.2) cannot miss a budget by an ulp.
const dayMicro = (s: Subject): number => Math.round(s.dayBase + s.dayFly + s.dayOwn)
const monthMicro = (s: Subject): number => Math.round(s.monthBase + s.monthFly + s.monthOwn)
const micro = (usd: number): number => Math.round(usd * MICRO)

export class Limiter {
  readonly #now: () => number
  readonly #sync: SharedSync | null
  readonly #w = new Windows()
  readonly #keys = new Map<string, Subject>()
  readonly #accounts = new Map<string, Subject>()
  readonly #pricing: Pricing | null
  readonly #holding: boolean
  readonly #board: RequestBoard | null
  /** Calls whose key or account found no room on the board (each counted once). */
  #noRoomCalls = 0
  /** Held per key ('k:' id) and account ('a:' id), and per call by its trace id. */
  readonly #held = new Map<string, Held>()
  readonly #holds = new Map<string, Hold>()
  #holdSweep: NodeJS.Timeout | null = null
  #closed = false
  #sweeping: NodeJS.Immediate | null = null

  constructor (opts: LimiterOptions = {}) {
    this.#now = opts.now ?? Date.now
    this.#pricing = opts.pricing ?? null
    this.#holding = opts.hold === true
    this.#board = opts.board ?? null
    this.#w.refresh(this.#now())
    const warn = opts.warn ?? ((msg, fields) => { process.emitWarning(`${msg} ${JSON.stringify(fields)}`, 'TracegateLimits') })
    const shared = opts.shared ?? null
    const clock = { windows: this.#w, now: this.#now, refresh: (now: number) => { this.#refresh(now) }, fold: (s: Subject) => { this.#fold(s) }, publish: (s: Subject) => { this.#publish(s) } }
    this.#sync = shared === null ? null : new SharedSync(shared, clock, opts.syncMs ?? 100, warn)
  }

  /** 'local' (no Redis configured), 'shared' (synced), 'fallback' (Redis configured but away, or not yet answered). */
  get mode (): LimitsMode {
    return this.#sync === null ? 'local' : this.#sync.mode
  }

  /** How full the request board is, for the metrics (null: no board, the main thread serves alone). */
  get boardStats (): BoardStats | null {
    const b = this.#board
    return b === null ? null : { slots: b.slots, keys: b.placed.key, accounts: b.placed.account, noRoomCalls: this.#noRoomCalls }
  }

  /** The request board's memory, for the front threads (null: none). */
  get boardBuffer (): SharedArrayBuffer | null {
    return this.#board?.buffer ?? null
  }

  /** Keys and accounts held in memory (for metrics and tests). */
  get subjectCount (): number {
    return this.#keys.size + this.#accounts.size
  }

  /** O(1) (plus the model matcher); counts the request when admitted. null = admitted. */
  admit (call: LimitCall, model: string | null, bodyBytes: number): Refusal | null {
    return checkRules(call.key, call.account, model, bodyBytes) ?? this.count(call)
  }

  /**
   * The counted limits (requests, tokens, spend of key and account, each with what its calls in flight
   * hold): counts the request when admitted, and holds its estimate under a budget or tpm.
   */
  count (call: LimitCall): Refusal | null {
    const now = this.#now()
    if (now >= this.#w.minuteEnd || now < this.#w.minuteStart) this.#refresh(now)
    const est = call.estimate
    const tpm = call.key.tpm !== null || call.account.tpm !== null
    const micro = priceHold(call, this.#pricing)
    if (typeof micro !== 'number') return micro
    const k = this.#subject(this.#keys, call.keyId, 'k:')
    const a = this.#subject(this.#accounts, call.accountId, 'a:')
    // A key and account the front threads could judge on the board are put there (both, or neither is used).
    if (this.#board !== null && boardable(call.key) && boardable(call.account)) {
      const noRoom = this.#board.noRoom
      this.#boarded(k, 'key', call.keyId)
      this.#boarded(a, 'account', call.accountId)
      if (this.#board.noRoom !== noRoom) this.#noRoomCalls++
    }
    const epoch = epochOf(now)
    const refused = this.#check(call.key, k, call.account, a, now, epoch, call.relay === true) ?? this.#countRequest(call, k, a, now)
    if (refused !== null) return refused
    const tok = tpm && est !== undefined ? est.promptTokens + est.outputTokens : 0
    if (!this.#holding || call.callId === undefined || (tok === 0 && micro === 0)) return null
    if (k.slot < 0 || a.slot < 0) {
      this.#hold(call.callId, k, a, tok, micro, epoch)
      return null
    }
    // Both on the board: held there as a front thread holds, checked again in the same step, so a
    // front thread holding since the check above cannot let both calls pass.
    const w = this.#w
    const board = this.#board!
    const late = board.holdBoth(k.slot, a.slot, holdLimits(call.key), holdLimits(call.account), { minute: minuteOf(w.minuteStart), day: dayOf(w.dayStart), month: monthOf(w.monthStart), epoch }, tok, micro)
    if (late !== null) {
      board.undo(k.slot, minuteOf(w.minuteStart))
      board.undo(a.slot, minuteOf(w.minuteStart))
      const limits = late.whose === 'key' ? call.key : call.account
      return late.limit === 'tpm'
        ? this.#rateLimited(call.key, k, call.account, a, now, `The ${late.whose}'s limit of ${limits.tpm!} tokens per minute`)
        : this.#overBudget(call.key, k, call.account, a, now, late.whose, late.limit, (late.limit === 'day' ? limits.budgetDayUsd : limits.budgetMonthUsd)!)
    }
    this.#holds.set(call.callId, { k: k.name, a: a.name, tok, micro, at: performance.now(), kEpoch: epoch, aEpoch: epoch })
    this.#holdSweep ??= setInterval(() => { this.#expire() }, HOLD_SWEEP_MS).unref()
    return null
  }

  /** The traces of these ids are built (their cost counted, or they had none): their holds end. */
  settle (callIds: readonly string[]): void {
    if (this.#holds.size === 0) return
    for (const id of callIds) {
      const h = this.#holds.get(id)
      if (h !== undefined) this.#release(id, h)
    }
  }

  /** Calls holding an estimate now (for tests and metrics). */
  get holding (): number {
    return this.#holds.size
  }

  /**
   * What a subject's calls in flight hold: on the board for a subject with a slot (front threads hold
   * there too), in this thread's map otherwise.
   */
  #heldOf (name: string, slot: number, epoch: number): Held | undefined {
    if (slot < 0) return this.#held.get(name)
    return { tok: this.#board!.heldTokens(slot, epoch), micro: this.#board!.heldMicro(slot, epoch) }
  }

  /**
   * A hold of a key and account not both on the board (count() holds those there itself). `micro` is
   * rounded up, so a hold is whole micro-dollars wherever it lives. The one of the two on the board (the
   * other found no room) is held there after this thread's check, not within it: a front thread judging
   * another key of it in between can let one more call pass, as two instances can between syncs.
   */
  #hold (callId: string, k: Subject, a: Subject, tok: number, micro: number, epoch: number): void {
    const whole = Math.ceil(micro)
    this.#holds.set(callId, { k: k.name, a: a.name, tok, micro: whole, at: performance.now(), kEpoch: k.slot >= 0 ? epoch : -1, aEpoch: a.slot >= 0 ? epoch : -1 })
    for (const s of [k, a]) {
      if (s.slot >= 0) { this.#board!.hold(s.slot, epoch, tok, whole); continue }
      const h = this.#held.get(s.name)
      if (h === undefined) this.#held.set(s.name, { tok, micro: whole })
      else { h.tok += tok; h.micro += whole }
    }
    this.#holdSweep ??= setInterval(() => { this.#expire() }, HOLD_SWEEP_MS).unref()
  }

  /** Lets a hold go where it is held now: a subject put on the board since took its holds there. */
  #release (callId: string, hold: Hold): void {
    this.#holds.delete(callId)
    for (const [name, epoch] of [[hold.k, hold.kEpoch], [hold.a, hold.aEpoch]] as const) {
      if (epoch >= 0) {
        const slot = this.#slotOf(name)
        if (slot >= 0) this.#board!.release(slot, epoch, hold.tok, hold.micro)
        continue
      }
      const h = this.#held.get(name)
      if (h === undefined) continue
      h.tok -= hold.tok
      h.micro -= hold.micro
      if (h.tok <= 0 && h.micro <= 0) this.#held.delete(name)
    }
  }

  /** The board slot of a subject named 'k:<id>' or 'a:<id>' (-1: none). */
  #slotOf (name: string): number {
    if (this.#board === null) return -1
    return this.#board.find(name.startsWith('k:') ? 'key' : 'account', name.slice(2))
  }

  /**
   * A front thread's calls whose traces are built (their costs recorded just before): what they held on
   * the board is let go, in the key's and the account's slots.
   */
  released (keyId: string, accountId: string, epoch: number, tok: number, micro: number): void {
    const board = this.#board
    if (board === null) return
    for (const [kind, id] of [['key', keyId], ['account', accountId]] as const) {
      const slot = board.find(kind, id)
      if (slot >= 0) board.release(slot, epoch, tok, micro)
    }
  }

  /** What the calls in flight of a key or account hold now: tokens and USD, wherever they are held (tests, CLI). */
  held (subject: { keyId?: string; accountId?: string }): { tokens: number; usd: number } {
    const name = subject.keyId !== undefined ? 'k:' + subject.keyId : 'a:' + (subject.accountId ?? '')
    const h = this.#heldOf(name, this.#slotOf(name), epochOf(this.#now()))
    return { tokens: h?.tok ?? 0, usd: (h?.micro ?? 0) / MICRO }
  }

  /** Holds whose trace never came are let go after HOLD_MAX_MS (on the process's own clock, not the limits'). */
  #expire (): void {
    const oldest = performance.now() - HOLD_MAX_MS
    for (const [id, h] of this.#holds) if (h.at < oldest) this.#release(id, h)
    if (this.#holds.size === 0 && this.#holdSweep !== null) { clearInterval(this.#holdSweep); this.#holdSweep = null }
  }

  /** Requests already admitted elsewhere (a front thread, for a key without counted limits): counted, not judged. */
  counted (keyId: string, accountId: string, n: number): void {
    const now = this.#now()
    if (now >= this.#w.minuteEnd || now < this.#w.minuteStart) this.#refresh(now)
    const k = this.#subject(this.#keys, keyId, 'k:')
    const a = this.#subject(this.#accounts, accountId, 'a:')
    this.#admit(k, a, n, now)
  }

  /** `n` admitted requests of a key and its account, in the current window. */
  #admit (k: Subject, a: Subject, n: number, now: number): void {
    k.reqOwn += n
    a.reqOwn += n
    this.#touch(k, now)
    this.#touch(a, now)
    if (n !== 0) { this.#publish(k); this.#publish(a) }
  }

  /**
   * The subject has a slot on the board, given one now if there is room: what it counted so far and what
   * its calls in flight hold go with it, before a front thread can find it.
   */
  #boarded (s: Subject, kind: BoardKind, id: string): void {
    if (s.slot >= 0) return
    const w = this.#w
    const h = this.#held.get(s.name)
    const epoch = epochOf(this.#now())
    s.slot = this.#board!.add(kind, id, minuteOf(w.minuteStart), requests(s), {
      tokens: tokens(s), day: dayOf(w.dayStart), dayMicro: dayMicro(s), month: monthOf(w.monthStart), monthMicro: monthMicro(s),
      heldTokens: h?.tok ?? 0, heldMicro: h?.micro ?? 0, epoch,
    })
    if (s.slot >= 0 && h !== undefined) {
      this.#held.delete(s.name)
      // Its calls' holds now end on the board, in the quarter they moved to.
      for (const hold of this.#holds.values()) {
        if (hold.k === s.name) hold.kEpoch = epoch
        if (hold.a === s.name) hold.aEpoch = epoch
      }
    }
    // Whatever the slot already counts this minute (it outlives a swept subject) is folded in next.
    s.boardSeen = 0
    this.#publish(s)
  }

  /**
   * Counts the call's request against key and account, after every other check passed: on the board by
   * compare-and-swap for a subject that has a slot (front threads count there too, so a limit's last
   * request goes to one caller whichever thread asks), in its own counts otherwise (only this thread
   * counts a subject without a slot). The requests per minute are checked again here, atomically.
   */
  #countRequest (call: LimitCall, k: Subject, a: Subject, now: number): Refusal | null {
    const minute = minuteOf(this.#w.minuteStart)
    if (!this.#countOne(k, call.key.rpm, minute)) {
      return this.#rateLimited(call.key, k, call.account, a, now, `The key's limit of ${call.key.rpm!} requests per minute`)
    }
    if (!this.#countOne(a, call.account.rpm, minute)) {
      if (k.slot >= 0) this.#board!.undo(k.slot, minute)
      else k.reqOwn--
      this.#fold(k)
      this.#fold(a)
      return this.#rateLimited(call.key, k, call.account, a, now, `The account's limit of ${call.account.rpm!} requests per minute`)
    }
    this.#fold(k)
    this.#fold(a)
    this.#touch(k, now)
    this.#touch(a, now)
    this.#publish(k)
    this.#publish(a)
    return null
  }

  /** One request of `s` counted unless it would pass `limit` (null: none). */
  #countOne (s: Subject, limit: number | null, minute: number): boolean {
    if (s.slot >= 0) return this.#board!.admit(s.slot, minute, limit) >= 0
    if (limit !== null && requests(s) >= limit) return false
    s.reqOwn++
    return true
  }

  /** Adds what the front threads counted on the board since the last fold to the subject's own requests. */
  #fold (s: Subject): void {
    if (s.slot < 0) return
    const n = this.#board!.count(s.slot, minuteOf(s.minute))
    // A request taken back after it was folded (undo) stays counted: never fewer than were sent to Redis.
    if (n <= s.boardSeen) return
    s.reqOwn += n - s.boardSeen
    s.boardSeen = n
  }

  /**
   * Tells the board the subject's requests of the minute that are not on it (the store's seed, other
   * instances, notes), and its tokens and spend as counted here.
   */
  #publish (s: Subject): void {
    if (s.slot < 0) return
    const board = this.#board!
    const minute = minuteOf(s.minute)
    board.setOther(s.slot, minute, s.reqBase + s.reqFly + s.reqOwn - s.boardSeen)
    board.setUse(s.slot, minute, tokens(s), dayOf(s.day), dayMicro(s), monthOf(s.month), monthMicro(s))
  }

  /**
   * A built trace's tokens and cost, at the call's start time (ms). Cost counts in the day and month that
   * contain `atMs` while they are current. Tokens count in the current minute: a trace arriving after its
   * minute has ended still counts against tpm, so long streamed answers cannot slip past it.
   */
  record (keyId: string, accountId: string, tokenCount: number, costUsd: number, atMs: number): void {
    const now = this.#now()
    if (now >= this.#w.minuteEnd || now < this.#w.minuteStart) this.#refresh(now)
    const toks = tokenCount > 0 && Number.isFinite(tokenCount) ? Math.round(tokenCount) : 0
    const cost = costUsd > 0 && Number.isFinite(costUsd) ? costUsd * MICRO : 0
    const dayCost = atMs >= this.#w.dayStart ? cost : 0
    const monthCost = atMs >= this.#w.monthStart ? cost : 0
    if (toks === 0 && monthCost === 0) return
    this.#add(this.#subject(this.#keys, keyId, 'k:'), toks, dayCost, monthCost, now)
    this.#add(this.#subject(this.#accounts, accountId, 'a:'), toks, dayCost, monthCost, now)
  }

  /** Restart: the use already stored, for the windows containing now. Call before serving: it replaces the stored part. */
  seed (rows: readonly LimitUsageRow[]): void {
    const now = this.#now()
    this.#refresh(now)
    const sums = new Map<string, [number, number, number, number]>()
    for (const row of rows) {
      const k = this.#subject(this.#keys, row.keyId, 'k:')
      setBases(k, row.minuteRequests, row.minuteTokens, row.dayUsd, row.monthUsd)
      this.#publish(k)
      this.#touch(k, now)
      const sum = sums.get(row.accountId) ?? [0, 0, 0, 0]
      sum[0] += row.minuteRequests
      sum[1] += row.minuteTokens
      sum[2] += row.dayUsd
      sum[3] += row.monthUsd
      sums.set(row.accountId, sum)
    }
    for (const [accountId, [r, t, d, m]] of sums) {
      const a = this.#subject(this.#accounts, accountId, 'a:')
      setBases(a, r, t, d, m)
      this.#publish(a)
      this.#touch(a, now)
    }
  }

  /**
   * Current use, for the dashboard's keys page and the CLI: counts in the current windows and when each ends
   * (epoch ms). With Redis, a key or account this instance has not used is read from the next sync on (it
   * joins the sync for a minute): the first answer about it has only this instance's counts.
   */
  usage (subject: { keyId?: string; accountId?: string }): LimitUsage {
    const now = this.#now()
    if (now >= this.#w.minuteEnd || now < this.#w.minuteStart) this.#refresh(now)
    const w = this.#w
    const s = subject.keyId !== undefined
      ? this.#watch(this.#keys, subject.keyId, 'k:', now)
      : subject.accountId !== undefined ? this.#watch(this.#accounts, subject.accountId, 'a:', now) : undefined
    const inMinute = s !== undefined && s.minute === w.minuteStart
    const inDay = s !== undefined && s.day === w.dayStart
    const inMonth = s !== undefined && s.month === w.monthStart
    return {
      minuteRequests: inMinute ? requests(s) : 0,
      minuteTokens: inMinute ? tokens(s) : 0,
      dayUsd: inDay ? dayMicro(s) / MICRO : 0,
      monthUsd: inMonth ? monthMicro(s) / MICRO : 0,
      minuteResetMs: w.minuteEnd,
      dayResetMs: w.dayEnd,
      monthResetMs: w.monthEnd,
    }
  }

  /** Stops the sweep and the sync; with Redis, sends the last counts first (bounded by its command timeout). */
  async close (): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    if (this.#sweeping !== null) clearImmediate(this.#sweeping)
    if (this.#holdSweep !== null) clearInterval(this.#holdSweep)
    if (this.#sync !== null) await this.#sync.close()
  }

  #subject (map: Map<string, Subject>, id: string, prefix: string): Subject {
    let s = map.get(id)
    if (s === undefined) {
      s = new Subject(prefix + id)
      // A slot outlives a subject the month's sweep dropped: the threads may still count on it.
      if (this.#board !== null) s.slot = this.#board.find(prefix === 'k:' ? 'key' : 'account', id)
      map.set(id, s)
    }
    // Windows nest (minute in day in month), so a current minute means the rest is current too.
    if (s.minute !== this.#w.minuteStart) roll(s, this.#w)
    this.#fold(s)
    return s
  }

  /** The subject, and with Redis kept in the sync for a minute more; without Redis only if it is known. */
  #watch (map: Map<string, Subject>, id: string, prefix: string, now: number): Subject | undefined {
    if (this.#sync === null) return map.has(id) ? this.#subject(map, id, prefix) : undefined
    const s = this.#subject(map, id, prefix)
    this.#touch(s, now)
    return s
  }

  #add (s: Subject, toks: number, dayCost: number, monthCost: number, now: number): void {
    s.tokOwn += toks
    s.dayOwn += dayCost
    s.monthOwn += monthCost
    this.#touch(s, now)
    this.#publish(s)
  }

  #touch (s: Subject, now: number): void {
    s.seenAt = now
    if (!s.listed && this.#sync !== null) this.#sync.list(s)
  }

  #refresh (now: number): void {
    if (this.#w.refresh(now)) this.#sweep()
  }

  /**
   * Memory stays bounded by the subjects used this month: when a month starts, every subject whose counts all
   * belong to an earlier month is dropped (losing nothing: each of its windows has ended), a chunk per turn
   * of the event loop so a million one-off keys never stall a request.
   */
  #sweep (): void {
    if (this.#sweeping !== null || this.#closed) return
    const maps = [this.#keys, this.#accounts]
    let m = 0
    let entries = maps[0]!.entries()
    const step = (): void => {
      for (let n = 0; n < SWEEP_CHUNK; n++) {
        const next = entries.next()
        if (next.done === true) {
          if (++m === maps.length) { this.#sweeping = null; return }
          entries = maps[m]!.entries()
          continue
        }
        const [id, s] = next.value
        // A subject in the Redis sync's list is rolled by the sync: dropped here, the sync would go on
        // folding its board slot beside the subject that replaces it, and count the slot twice.
        if (s.month < this.#w.monthStart && !s.listed) maps[m]!.delete(id)
      }
      this.#sweeping = setImmediate(step).unref()
    }
    this.#sweeping = setImmediate(step).unref()
  }

  /**
   * Every limit on the counts as they stand; `rpmOnly`: requests per minute alone. A request is counted
   * after (#countRequest), which checks the requests per minute again where front threads count too.
   */
  #check (key: Limits, k: Subject, account: Limits, a: Subject, now: number, epoch: number, rpmOnly: boolean): Refusal | null {
    if (key.rpm !== null && requests(k) >= key.rpm) return this.#rateLimited(key, k, account, a, now, `The key's limit of ${key.rpm} requests per minute`)
    if (account.rpm !== null && requests(a) >= account.rpm) return this.#rateLimited(key, k, account, a, now, `The account's limit of ${account.rpm} requests per minute`)
    if (rpmOnly) return null
    const hk = this.#heldOf(k.name, k.slot, epoch)
    const ha = this.#heldOf(a.name, a.slot, epoch)
    if (key.tpm !== null && tokens(k) + (hk?.tok ?? 0) >= key.tpm) return this.#rateLimited(key, k, account, a, now, `The key's limit of ${key.tpm} tokens per minute`)
    if (account.tpm !== null && tokens(a) + (ha?.tok ?? 0) >= account.tpm) return this.#rateLimited(key, k, account, a, now, `The account's limit of ${account.tpm} tokens per minute`)
    const kMicro = hk?.micro ?? 0
    const aMicro = ha?.micro ?? 0
    if (key.budgetDayUsd !== null && dayMicro(k) + kMicro >= micro(key.budgetDayUsd)) return this.#overBudget(key, k, account, a, now, 'key', 'day', key.budgetDayUsd)
    if (account.budgetDayUsd !== null && dayMicro(a) + aMicro >= micro(account.budgetDayUsd)) return this.#overBudget(key, k, account, a, now, 'account', 'day', account.budgetDayUsd)
    if (key.budgetMonthUsd !== null && monthMicro(k) + kMicro >= micro(key.budgetMonthUsd)) return this.#overBudget(key, k, account, a, now, 'key', 'month', key.budgetMonthUsd)
    if (account.budgetMonthUsd !== null && monthMicro(a) + aMicro >= micro(account.budgetMonthUsd)) return this.#overBudget(key, k, account, a, now, 'account', 'month', account.budgetMonthUsd)
    return null
  }

  #rateLimited (key: Limits, k: Subject, account: Limits, a: Subject, now: number, what: string): Refusal {
    const wait = this.#w.minuteEnd - now
    return rateLimitedRefusal(what, wait, this.#headers(key, k, account, a, now, wait))
  }

  #overBudget (key: Limits, k: Subject, account: Limits, a: Subject, now: number, whose: 'key' | 'account', period: 'day' | 'month', usd: number): Refusal {
    const wait = (period === 'day' ? this.#w.dayEnd : this.#w.monthEnd) - now
    return overBudgetRefusal(whose, period, usd, wait, this.#headers(key, k, account, a, now, wait))
  }

  #headers (key: Limits, k: Subject, account: Limits, a: Subject, now: number, waitMs: number): Record<string, string> {
    return limitHeaders(key, account, { keyRequests: requests(k), accountRequests: requests(a), keyTokens: tokens(k), accountTokens: tokens(a) }, this.#w.minuteEnd - now, waitMs)
  }
}

/** A 429 for requests or tokens per minute: `what` names the limit ("The key's limit of 60 requests per minute"). */
export function rateLimitedRefusal (what: string, waitMs: number, headers: Record<string, string>): Refusal {
  return refusal('rate_limited', `${what} is reached; try again in ${formatDuration(waitMs)}.`, null, null, null, waitMs, headers)
}

/**
 * What a call holds under a budget, in whole micro-dollars: its estimate priced (0 with no budget, no
 * prices, or no provider call). A model with no price is refused: under a budget a call must have a
 * price, or it could spend without ever counting.
 */
export function priceHold (call: LimitCall, pricing: Pricing | null): number | Refusal {
  if (!(budgeted(call.key) || budgeted(call.account)) || pricing === null || call.provider === undefined || call.model === undefined) return 0
  const est = call.estimate
  const usd = call.model === null ? null : pricing.cost(call.provider, call.model, { input: est?.promptTokens ?? 0, output: est?.outputTokens ?? 0, cached: 0 }).costUsd
  return usd === null ? unpricedRefusal(call.model ?? null) : Math.ceil(usd * MICRO)
}

/** A 429 for a spent budget of the key or its account, which resets in `waitMs`. */
export function overBudgetRefusal (whose: 'key' | 'account', period: 'day' | 'month', usd: number, waitMs: number, headers: Record<string, string>): Refusal {
  const resets = period === 'day' ? 'at 00:00 UTC' : 'on the 1st at 00:00 UTC'
  return refusal('budget_exceeded', `The ${whose}'s budget of ${usd} USD per ${period} is spent; it resets ${resets}, in ${formatDuration(waitMs)}.`,
    null, period, usd, waitMs, headers)
}

/**
 * The 429 headers: the wait, and for requests and tokens (where limited) the more restrictive of key and
 * account, with the minute's counts and what is left of it.
 */
export function limitHeaders (key: Limits, account: Limits, counts: { keyRequests: number; accountRequests: number; keyTokens: number; accountTokens: number }, minuteLeftMs: number, waitMs: number): Record<string, string> {
  const h: Record<string, string> = {
    'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))),
    'retry-after-ms': String(waitMs),
  }
  const reset = formatDuration(minuteLeftMs)
  const req = tightest(key.rpm, counts.keyRequests, account.rpm, counts.accountRequests)
  if (req !== null) {
    h['x-ratelimit-limit-requests'] = String(req.limit)
    h['x-ratelimit-remaining-requests'] = String(req.remaining)
    h['x-ratelimit-reset-requests'] = reset
  }
  const tok = tightest(key.tpm, counts.keyTokens, account.tpm, counts.accountTokens)
  if (tok !== null) {
    h['x-ratelimit-limit-tokens'] = String(tok.limit)
    h['x-ratelimit-remaining-tokens'] = String(tok.remaining)
    h['x-ratelimit-reset-tokens'] = reset
  }
  return h
}

function setBases (s: Subject, req: number, tok: number, dayUsd: number, monthUsd: number): void {
  const clean = (n: number): number => (Number.isFinite(n) && n > 0 ? n : 0)
  s.reqBase = Math.round(clean(req))
  s.tokBase = Math.round(clean(tok))
  s.dayBase = clean(dayUsd) * MICRO
  s.monthBase = clean(monthUsd) * MICRO
  s.floorGen = 0
}

function tightest (keyLimit: number | null, keyCount: number, accountLimit: number | null, accountCount: number): { limit: number; remaining: number } | null {
  const k = keyLimit === null ? null : { limit: keyLimit, remaining: Math.max(0, keyLimit - keyCount) }
  const a = accountLimit === null ? null : { limit: accountLimit, remaining: Math.max(0, accountLimit - accountCount) }
  if (k === null || a === null) return k ?? a
  if (a.remaining !== k.remaining) return a.remaining < k.remaining ? a : k
  return a.limit < k.limit ? a : k
}

function unpricedRefusal (model: string | null): Refusal {
  const shown = model === null ? 'named by this request' : JSON.stringify(model.length > 100 ? `${model.slice(0, 100)}…` : model)
  return refusal('model_not_priced', `The model ${shown} has no price, and this key or its account has a spend budget: a call to it could not be counted against the budget.`, 'model', null, null, null, NO_HEADERS)
}

/** OpenAI's duration format for x-ratelimit-reset-*: `20ms`, `1s`, `59.5s`, `6m0s`, `1h2m3s`. */
export function formatDuration (ms: number): string {
  const whole = Math.max(0, Math.ceil(ms))
  if (whole < 1000) return `${whole}ms`
  const h = Math.floor(whole / 3_600_000)
  const m = Math.floor((whole % 3_600_000) / 60_000)
  const s = (whole % 60_000) / 1000
  return `${h > 0 ? `${h}h` : ''}${h > 0 || m > 0 ? `${m}m` : ''}${s}s`
}
