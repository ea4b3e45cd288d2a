// Limit counts in shared memory, so front threads judge a call's counted limits without asking the main
// thread. One table for keys and one for accounts, each a fixed array of slots found by the subject's id
// (a UUID, as two 64-bit words) with linear probing. Only the main thread's Limiter adds a subject (it
// writes the id and the counts before the id becomes visible); a slot is never moved or freed. Each slot holds:
// - the minute's count: this instance's admitted requests of the minute, packed with the minute as
//   (minute << 32) | count and raised by compare-and-swap, so threads racing for a limit's last request
//   admit exactly as many as one thread would;
// - the requests counted elsewhere in that minute (the store's seed, other instances through Redis),
//   written by the main thread, packed the same way;
// - the tokens of the minute and the spend (whole micro-dollars) of the UTC day and month, all of them as
//   the main thread counts them (it is told every built trace's cost), each packed with its window;
// - the tokens and micro-dollars held by calls in flight (reserve.ts): raised by compare-and-swap only
//   while the limit has room, so racing threads never hold past it, and lowered when a call's trace is built.
//   Holds are kept per quarter hour in two words each, the current quarter's and the last one's, so a hold
//   whose trace never comes (a thread that died with calls in flight) is gone 15 to 30 minutes after it
//   was taken, as the main thread's own holds are (limiter.ts HOLD_MAX_MS).
// A word from an earlier window reads as 0. A subject the table has no room for is judged by the main thread.

const WORDS = 11
const HI = 0
const LO = 1
const COUNT = 2
const OTHER = 3
const TOKENS = 4
const DAY = 5
const MONTH = 6
/** Two words each: the quarter hours `epoch & 1` = 0 and 1. */
const HELD_TOKENS = 7
const HELD_MICRO = 9
/** A slot whose id is being written. */
const CLAIMING = -1n
const LOW32 = 0xffffffffn
/** How far a lookup probes before it gives up: the table is never that crowded before it is full. */
const PROBES = 64

export type BoardKind = 'key' | 'account'

/** Slots per table by default: 65,536 keys and as many accounts with counted limits, 9 MiB in all (touched pages only). */
export const BOARD_SLOTS = 65_536

/** The minute `ms` (epoch) falls in, as the table counts it. */
export const minuteOf = (ms: number): number => Math.floor(ms / 60_000)
/** The UTC day `ms` falls in (days since the epoch). */
export const dayOf = (ms: number): number => Math.floor(ms / 86_400_000)
/** The UTC month `ms` falls in (months since January 1970). */
export function monthOf (ms: number): number {
  const d = new Date(ms)
  return (d.getUTCFullYear() - 1970) * 12 + d.getUTCMonth()
}

/**
 * The most the words hold: tokens per minute below 2^32, micro-dollars per day below 2^43 (8.7 million
 * USD) and per month below 2^48. A limit beyond them keeps its subject off the table (limiter.ts `boardable`).
 */
export const MAX_TOKENS = 4_294_967_295
export const MAX_DAY_MICRO = 2 ** 43 - 1
export const MAX_MONTH_MICRO = 2 ** 48 - 1
const DAY_SHIFT = 43n
const MONTH_SHIFT = 48n
/** Held tokens or micro-dollars per quarter hour, below 2^40 (more saturates: nothing more fits). */
const HELD_SHIFT = 40n
const MAX_HELD = 2 ** 40 - 1

/** How long a hold's quarter lasts: a hold outlives its quarter by one more. */
export const HOLD_EPOCH_MS = 15 * 60_000
/** The quarter hour `ms` falls in, as holds are kept. */
export const epochOf = (ms: number): number => Math.floor(ms / HOLD_EPOCH_MS)

const pack = (minute: number, n: number): bigint => (BigInt(minute) << 32n) | BigInt(n)
const packIn = (window: number, shift: bigint, n: number, max: number): bigint =>
  (BigInt(window) << shift) | BigInt(Math.min(max, Math.max(0, Math.round(n))))
const unpackIn = (v: bigint, window: number, shift: bigint): number =>
  Number(v >> shift) === window ? Number(v & ((1n << shift) - 1n)) : 0

/** A new slot's use in its windows and what its calls in flight hold (micro-dollars whole). */
export interface SlotUse {
  readonly tokens: number
  readonly day: number
  readonly dayMicro: number
  readonly month: number
  readonly monthMicro: number
  readonly heldTokens: number
  readonly heldMicro: number
  /** The quarter hour the holds go in (epochOf). */
  readonly epoch: number
}

/** A subject's limits as the board holds against them: tokens per minute, budgets in whole micro-dollars. */
export interface HoldLimits {
  readonly tpm: number | null
  readonly dayMicro: number | null
  readonly monthMicro: number | null
}

/** The windows a hold is judged in: minute (minuteOf), day (dayOf), month (monthOf), quarter hour (epochOf). */
export interface HoldWindows {
  readonly minute: number
  readonly day: number
  readonly month: number
  readonly epoch: number
}

/** How full the board is: slots per table, the subjects placed in each, and the calls whose key or account found no room. */
export interface BoardStats {
  readonly slots: number
  readonly keys: number
  readonly accounts: number
  readonly noRoomCalls: number
}

/** Whose limit refused a hold, and which. */
export interface HoldRefusal {
  readonly whose: 'key' | 'account'
  readonly limit: HoldRefused
}

/** Which limit refused a hold: the tokens per minute, or the budget of the day or the month. */
export type HoldRefused = 'tpm' | 'day' | 'month'

/** The UUID's two halves as signed 64-bit words; null when it is not a UUID (such a subject stays off the table). */
function idWords (id: string): [bigint, bigint] | null {
  const hex = id.length === 36 ? id.slice(0, 8) + id.slice(9, 13) + id.slice(14, 18) + id.slice(19, 23) + id.slice(24) : ''
  if (!/^[0-9a-f]{32}$/i.test(hex)) return null
  const hi = BigInt.asIntN(64, BigInt('0x' + hex.slice(0, 16)))
  // 0 marks a free slot and CLAIMING one being written: an id whose first half is either stays off.
  if (hi === 0n || hi === CLAIMING) return null
  return [hi, BigInt.asIntN(64, BigInt('0x' + hex.slice(16)))]
}

export class RequestBoard {
  readonly buffer: SharedArrayBuffer
  readonly #words: BigInt64Array
  readonly #slots: number
  /** Main thread only (it alone adds): the subjects given a slot, by kind, and the adds that found none within reach. */
  readonly #placed = { key: 0, account: 0 }
  #noRoom = 0

  /** A new table (main thread), or a view of one whose buffer another thread made. */
  constructor (buffer: SharedArrayBuffer | null = null, slots = BOARD_SLOTS) {
    this.buffer = buffer ?? new SharedArrayBuffer(2 * slots * WORDS * 8)
    this.#words = new BigInt64Array(this.buffer)
    this.#slots = this.#words.length / (2 * WORDS)
  }

  /** The subjects given a slot, by kind (the main thread's count: it alone adds). */
  get placed (): { readonly key: number; readonly account: number } {
    return { ...this.#placed }
  }

  /** The adds that found no free slot within reach (an id that is no UUID is not counted). */
  get noRoom (): number {
    return this.#noRoom
  }

  /** Slots per table (keys and accounts have one each). */
  get slots (): number {
    return this.#slots
  }

  /** The subject's slot, or -1 when it has none. */
  find (kind: BoardKind, id: string): number {
    const at = this.#probe(kind, id)
    return at !== null && at.found ? at.slot : -1
  }

  /**
   * Main thread only: the subject's slot, added when absent with `other` requests counted elsewhere in
   * `minute` and its use and holds so far (all written before the slot can be found). -1 when the table
   * has no room or the id is no UUID.
   */
  add (kind: BoardKind, id: string, minute: number, other: number, use: SlotUse | null = null): number {
    const at = this.#probe(kind, id)
    if (at === null) {
      if (idWords(id) !== null) this.#noRoom++
      return -1
    }
    if (at.found) return at.slot
    // The main thread is the only one that adds, so the free slot the lookup stopped at is still free.
    const i = at.slot * WORDS
    if (Atomics.compareExchange(this.#words, i + HI, 0n, CLAIMING) !== 0n) return -1
    Atomics.store(this.#words, i + LO, at.id[1])
    Atomics.store(this.#words, i + COUNT, pack(minute, 0))
    Atomics.store(this.#words, i + OTHER, pack(minute, clamp(other)))
    if (use !== null) {
      this.setUse(at.slot, minute, use.tokens, use.day, use.dayMicro, use.month, use.monthMicro)
      Atomics.store(this.#words, i + HELD_TOKENS + (use.epoch & 1), packIn(use.epoch, HELD_SHIFT, use.heldTokens, MAX_HELD))
      Atomics.store(this.#words, i + HELD_MICRO + (use.epoch & 1), packIn(use.epoch, HELD_SHIFT, Math.ceil(use.heldMicro), MAX_HELD))
    }
    Atomics.store(this.#words, i + HI, at.id[0])
    this.#placed[kind]++
    return at.slot
  }

  /** Where the subject is, or the free slot its lookup stops at (found: false); null when neither is in reach. */
  #probe (kind: BoardKind, id: string): { slot: number; found: boolean; id: [bigint, bigint] } | null {
    const w = idWords(id)
    if (w === null) return null
    const base = kind === 'key' ? 0 : this.#slots
    const start = Number(BigInt.asUintN(32, w[1])) % this.#slots
    for (let p = 0; p < PROBES; p++) {
      const slot = base + (start + p) % this.#slots
      const at = slot * WORDS
      let hi = Atomics.load(this.#words, at + HI)
      // The main thread is between two stores: the slot is complete a few instructions later.
      while (hi === CLAIMING) hi = Atomics.load(this.#words, at + HI)
      if (hi === 0n) return { slot, found: false, id: w }
      if (hi === w[0] && Atomics.load(this.#words, at + LO) === w[1]) return { slot, found: true, id: w }
    }
    return null
  }

  /** This instance's requests of `minute` in the slot. */
  count (slot: number, minute: number): number {
    return unpack(Atomics.load(this.#words, slot * WORDS + COUNT), minute)
  }

  /** Requests of `minute` counted elsewhere. */
  other (slot: number, minute: number): number {
    return unpack(Atomics.load(this.#words, slot * WORDS + OTHER), minute)
  }

  /** Main thread only: what is counted elsewhere in `minute` changed. */
  setOther (slot: number, minute: number, other: number): void {
    Atomics.store(this.#words, slot * WORDS + OTHER, pack(minute, clamp(other)))
  }

  /**
   * Counts one request of `minute` (or of the word's later minute) when the minute's total (this
   * instance's and elsewhere's) is below `limit` (null: no limit). Returns the total with this request,
   * or -(total + 1) when refused.
   */
  admit (slot: number, minute: number, limit: number | null): number {
    const at = slot * WORDS + COUNT
    for (;;) {
      const v = Atomics.load(this.#words, at)
      // A caller whose clock read is a minute behind the word's (it was preempted across the minute's end)
      // counts in the word's minute: a count never moves back in time, so none is lost.
      minute = Math.max(minute, Number(v >> 32n))
      const n = unpack(v, minute)
      const total = n + this.other(slot, minute)
      if (limit !== null && total >= limit) return -(total + 1)
      if (Atomics.compareExchange(this.#words, at, v, pack(minute, n + 1)) === v) return total + 1
    }
  }

  /** Takes back a request admit() counted in `minute` (a later check refused the call); none once the minute is over. */
  undo (slot: number, minute: number): void {
    const at = slot * WORDS + COUNT
    for (;;) {
      const v = Atomics.load(this.#words, at)
      const n = unpack(v, minute)
      if (n === 0 || Atomics.compareExchange(this.#words, at, v, pack(minute, n - 1)) === v) return
    }
  }

  /**
   * Main thread only: the subject's tokens of `minute` and spend (micro-dollars) of `day` and `month`,
   * as it counts them. Written after what they replace was counted, before a hold is let go.
   */
  setUse (slot: number, minute: number, tokens: number, day: number, dayMicro: number, month: number, monthMicro: number): void {
    const at = slot * WORDS
    Atomics.store(this.#words, at + TOKENS, pack(minute, clamp(tokens)))
    Atomics.store(this.#words, at + DAY, packIn(day, DAY_SHIFT, dayMicro, MAX_DAY_MICRO))
    Atomics.store(this.#words, at + MONTH, packIn(month, MONTH_SHIFT, monthMicro, MAX_MONTH_MICRO))
  }

  /** Tokens of `minute`. */
  tokens (slot: number, minute: number): number {
    return unpack(Atomics.load(this.#words, slot * WORDS + TOKENS), minute)
  }

  /** Micro-dollars spent in `day` (dayOf). */
  daySpent (slot: number, day: number): number {
    return unpackIn(Atomics.load(this.#words, slot * WORDS + DAY), day, DAY_SHIFT)
  }

  /** Micro-dollars spent in `month` (monthOf). */
  monthSpent (slot: number, month: number): number {
    return unpackIn(Atomics.load(this.#words, slot * WORDS + MONTH), month, MONTH_SHIFT)
  }

  /** Tokens held by calls in flight, taken in quarter `epoch` or the one before. */
  heldTokens (slot: number, epoch: number): number {
    return this.#held(slot * WORDS + HELD_TOKENS, epoch)
  }

  /** Micro-dollars held by calls in flight, taken in quarter `epoch` or the one before. */
  heldMicro (slot: number, epoch: number): number {
    return this.#held(slot * WORDS + HELD_MICRO, epoch)
  }

  /**
   * Holds `tok` tokens in quarter `epoch` unless the minute's tokens and what is held already reach
   * `limit` (null: no limit, always held). Returns false when refused (nothing held).
   */
  holdTokens (slot: number, minute: number, epoch: number, tok: number, limit: number | null): boolean {
    return this.#raise(slot * WORDS + HELD_TOKENS, epoch, Math.round(tok), (held) => limit !== null && this.tokens(slot, minute) + held >= limit ? 'tpm' : null) === null
  }

  /**
   * Holds `micro` micro-dollars (rounded up) in quarter `epoch` unless the day's or the month's spend and
   * what is held already reach its budget (micro-dollars; null: none). Returns which refused, or null.
   */
  holdMicro (slot: number, day: number, month: number, epoch: number, micro: number, dayLimit: number | null, monthLimit: number | null): HoldRefused | null {
    return this.#raise(slot * WORDS + HELD_MICRO, epoch, Math.ceil(micro), (held) =>
      dayLimit !== null && this.daySpent(slot, day) + held >= dayLimit
        ? 'day'
        : monthLimit !== null && this.monthSpent(slot, month) + held >= monthLimit ? 'month' : null)
  }

  /**
   * Holds what a call may cost on key `k` and account `a`, each while its limits have room, in the main
   * thread's order of checks (key tpm, account tpm, then the day's budgets, then the month's); a refusal
   * takes back what was held. Returns the limit that refused, or null when both hold.
   */
  holdBoth (k: number, a: number, key: HoldLimits, account: HoldLimits, at: HoldWindows, tok: number, micro: number): HoldRefusal | null {
    const { minute, day, month, epoch } = at
    if (!this.holdTokens(k, minute, epoch, tok, key.tpm)) return { whose: 'key', limit: 'tpm' }
    if (!this.holdTokens(a, minute, epoch, tok, account.tpm)) {
      this.release(k, epoch, tok, 0)
      return { whose: 'account', limit: 'tpm' }
    }
    const byKey = this.holdMicro(k, day, month, epoch, micro, key.dayMicro, key.monthMicro)
    const byAccount = byKey !== null ? null : this.holdMicro(a, day, month, epoch, micro, account.dayMicro, account.monthMicro)
    if (byKey === null && byAccount === null) return null
    this.release(k, epoch, tok, byKey === null ? micro : 0)
    this.release(a, epoch, tok, 0)
    // Both subjects' budgets, in the main thread's order: a spent day is told before a spent month.
    const spent = (slot: number, l: HoldLimits, period: 'day' | 'month'): boolean => {
      const limit = period === 'day' ? l.dayMicro : l.monthMicro
      const used = period === 'day' ? this.daySpent(slot, day) : this.monthSpent(slot, month)
      return limit !== null && used + this.heldMicro(slot, epoch) >= limit
    }
    for (const period of ['day', 'month'] as const) {
      if (spent(k, key, period)) return { whose: 'key', limit: period }
      if (spent(a, account, period)) return { whose: 'account', limit: period }
    }
    return byKey !== null ? { whose: 'key', limit: byKey } : { whose: 'account', limit: byAccount! }
  }

  /** Holds what a call may cost with no check (the main thread checked it): tokens, micro-dollars. */
  hold (slot: number, epoch: number, tok: number, micro: number): void {
    this.#raise(slot * WORDS + HELD_TOKENS, epoch, Math.round(tok), () => null)
    this.#raise(slot * WORDS + HELD_MICRO, epoch, Math.ceil(micro), () => null)
  }

  /** Lets go of what a call held in quarter `epoch` (never below 0; nothing once that quarter's word moved on). */
  release (slot: number, epoch: number, tok: number, micro: number): void {
    this.#lower(slot * WORDS + HELD_TOKENS, epoch, Math.round(tok))
    this.#lower(slot * WORDS + HELD_MICRO, epoch, Math.ceil(micro))
  }

  #held (base: number, epoch: number): number {
    return unpackIn(Atomics.load(this.#words, base + (epoch & 1)), epoch, HELD_SHIFT) +
      unpackIn(Atomics.load(this.#words, base + ((epoch + 1) & 1)), epoch - 1, HELD_SHIFT)
  }

  /** Adds `add` to quarter `epoch`'s word (a word of an older quarter starts again at 0) unless `refuse` says why not. */
  #raise (base: number, epoch: number, add: number, refuse: (held: number) => HoldRefused | null): HoldRefused | null {
    const at = base + (epoch & 1)
    const n = Math.max(0, add)
    for (;;) {
      const v = Atomics.load(this.#words, at)
      const mine = unpackIn(v, epoch, HELD_SHIFT)
      const refused = refuse(mine + unpackIn(Atomics.load(this.#words, base + ((epoch + 1) & 1)), epoch - 1, HELD_SHIFT))
      if (refused !== null) return refused
      if (n === 0 || Atomics.compareExchange(this.#words, at, v, packIn(epoch, HELD_SHIFT, mine + n, MAX_HELD)) === v) return null
    }
  }

  #lower (base: number, epoch: number, by: number): void {
    if (by <= 0) return
    const at = base + (epoch & 1)
    for (;;) {
      const v = Atomics.load(this.#words, at)
      if (Number(v >> HELD_SHIFT) !== epoch) return
      const next = packIn(epoch, HELD_SHIFT, Math.max(0, unpackIn(v, epoch, HELD_SHIFT) - by), MAX_HELD)
      if (Atomics.compareExchange(this.#words, at, v, next) === v) return
    }
  }
}

function unpack (v: bigint, minute: number): number {
  return Number(v >> 32n) === minute ? Number(v & LOW32) : 0
}

/** A count as the table holds it: a whole number from 0 to 2^32 - 1 (rpm is stored as UInt32). */
function clamp (n: number): number {
  return Math.min(4_294_967_295, Math.max(0, Math.round(n)))
}
