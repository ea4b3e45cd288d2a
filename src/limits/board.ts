// Request counts in shared memory, so front threads judge requests per minute without asking the main
// thread. One table for keys and one for accounts, each a fixed array of slots found by the subject's id
// (a UUID, as two 64-bit words) with linear probing. Only the main thread's Limiter adds a subject (it
// writes the id, the count and what is counted elsewhere before the id becomes visible); a slot is never
// moved or freed. Each slot holds:
// - the minute's count: this instance's admitted requests of the minute, packed with the minute as
//   (minute << 32) | count and raised by compare-and-swap, so threads racing for a limit's last request
//   admit exactly as many as one thread would;
// - the requests counted elsewhere in that minute (the store's seed, other instances through Redis),
//   written by the main thread, packed the same way.
// A word from an earlier minute reads as 0. A subject the table has no room for is judged by the main
// thread, as any call under a tpm or budget is.

const WORDS = 4
const HI = 0
const LO = 1
const COUNT = 2
const OTHER = 3
/** A slot whose id is being written. */
const CLAIMING = -1n
const LOW32 = 0xffffffffn
/** How far a lookup probes before it gives up: the table is never that crowded before it is full. */
const PROBES = 64

export type BoardKind = 'key' | 'account'

/** Slots per table by default: 65,536 keys and as many accounts with counted limits, 4 MiB in all. */
export const BOARD_SLOTS = 65_536

/** The minute `ms` (epoch) falls in, as the table counts it. */
export const minuteOf = (ms: number): number => Math.floor(ms / 60_000)

const pack = (minute: number, n: number): bigint => (BigInt(minute) << 32n) | BigInt(n)

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

  /** A new table (main thread), or a view of one whose buffer another thread made. */
  constructor (buffer: SharedArrayBuffer | null = null, slots = BOARD_SLOTS) {
    this.buffer = buffer ?? new SharedArrayBuffer(2 * slots * WORDS * 8)
    this.#words = new BigInt64Array(this.buffer)
    this.#slots = this.#words.length / (2 * WORDS)
  }

  /** The subject's slot, or -1 when it has none. */
  find (kind: BoardKind, id: string): number {
    const at = this.#probe(kind, id)
    return at !== null && at.found ? at.slot : -1
  }

  /**
   * Main thread only: the subject's slot, added when absent with `other` requests counted elsewhere in
   * `minute` (written before the slot can be found). -1 when the table has no room or the id is no UUID.
   */
  add (kind: BoardKind, id: string, minute: number, other: number): number {
    const at = this.#probe(kind, id)
    if (at === null) return -1
    if (at.found) return at.slot
    // The main thread is the only one that adds, so the free slot the lookup stopped at is still free.
    const i = at.slot * WORDS
    if (Atomics.compareExchange(this.#words, i + HI, 0n, CLAIMING) !== 0n) return -1
    Atomics.store(this.#words, i + LO, at.id[1])
    Atomics.store(this.#words, i + COUNT, pack(minute, 0))
    Atomics.store(this.#words, i + OTHER, pack(minute, clamp(other)))
    Atomics.store(this.#words, i + HI, at.id[0])
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
}

function unpack (v: bigint, minute: number): number {
  return Number(v >> 32n) === minute ? Number(v & LOW32) : 0
}

/** A count as the table holds it: a whole number from 0 to 2^32 - 1 (rpm is stored as UInt32). */
function clamp (n: number): number {
  return Math.min(4_294_967_295, Math.max(0, Math.round(n)))
}
