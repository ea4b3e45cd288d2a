// The counters behind the limiter: one subject's counts in its current windows, the windows themselves, and
// the sync with a store of counters shared by every instance (Redis in production, see redis.ts): one
// round trip per sync that adds this instance's deltas and reads back the totals.
import type { LimitsMode } from '../domain/limits-mode.js'

const MINUTE_MS = 60_000
const DAY_MS = 86_400_000
/** A shared counter outlives its window by this, so an instance whose clock is a little behind still finds it. */
const GRACE_MS = 60_000
/** A subject untouched for this long is no longer synced; its totals are read again when it is next used. */
const ACTIVE_MS = 60_000

/**
 * One sync's work, as parallel arrays reused from sync to sync (a sync touches every active subject's
 * windows, so no object per counter). Entry i is one counter of one window.
 */
export interface SyncBatch {
  /** Counter names without the namespace, e.g. `k:<keyId>:requests:<windowStartMs>`: ids only, never a key. */
  readonly names: string[]
  /** Whole number to add (0: only read the total). */
  readonly adds: number[]
  /**
   * The total this instance last knew for the counter (the last total read, what it sent without an
   * answer, or the window's seed from the store), sent on every sync: a counter below it is first raised to
   * it. Counters only grow within a window, so one below what was read means Redis lost it (FLUSHALL,
   * eviction, a restart without persistence, a failover to an empty replica), and it is restored from what
   * the instances knew. 0: nothing known, nothing raised.
   */
  readonly floors: number[]
  /** Epoch ms after which the counter may be dropped: its window's end plus a grace. */
  readonly expireAtMs: number[]
}

export type SyncResult =
  /** `restored`: how many counters were below their floor and raised to it (Redis had lost them). */
  | { readonly ok: true; readonly totals: readonly number[]; readonly restored?: number }
  /**
   * `sent: false`: nothing reached the store (not connected), so the deltas can be sent again later.
   * `sent: true`: the commands were written but no full answer came back (timeout, connection lost): they
   * may or may not have been applied. `reason` never carries a secret (the URL's password).
   */
  | { readonly ok: false; readonly sent: boolean; readonly reason: string }

export interface SharedCounters {
  /**
   * 'ready': a sync can be sent now. 'connecting': the first connection has not settled yet (no failure to
   * report). 'down': not connected after a failure; reconnecting in the background. Never waits.
   */
  readonly state: 'connecting' | 'ready' | 'down'
  /** Goes up by one each time a connection becomes ready (the store behind it may have restarted empty). */
  readonly generation: number
  /** The last connection error, for the log line that says the store is away (never a secret). */
  readonly lastError: string | null
  /** Applies the batch in one round trip; totals[i] is counter i's total after its add. Never rejects. */
  sync (batch: SyncBatch): Promise<SyncResult>
  close (): Promise<void>
}

/** The current fixed windows: the minute (epoch ms floored to 60 000), the UTC day, the UTC month. */
export class Windows {
  minuteStart = 0
  minuteEnd = 0
  dayStart = 0
  dayEnd = 0
  monthStart = 0
  monthEnd = 0

  /** Moves the windows to `now`; true when a new month started (not on the first call). */
  refresh (now: number): boolean {
    this.minuteStart = now - (now % MINUTE_MS)
    this.minuteEnd = this.minuteStart + MINUTE_MS
    if (now >= this.dayEnd || now < this.dayStart) {
      this.dayStart = now - (now % DAY_MS)
      this.dayEnd = this.dayStart + DAY_MS
    }
    if (now < this.monthEnd && now >= this.monthStart) return false
    const started = this.monthEnd !== 0
    const d = new Date(now)
    this.monthStart = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1)
    this.monthEnd = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1)
    return started
  }
}

/**
 * One key's or one account's counts in its current windows (spend in micro-dollars). Each count is
 * base + fly + own: base is the total last read from the shared counters (or seeded from the store), fly
 * what this instance is sending in the sync under way, own what it counted since. Without shared counters
 * only the seed and own move.
 */
export class Subject {
  /** 'k:<keyId>' or 'a:<accountId>': the shared counters' names start with it. */
  readonly name: string
  minute = -1
  reqBase = 0
  reqFly = 0
  reqOwn = 0
  tokBase = 0
  tokFly = 0
  tokOwn = 0
  day = -1
  dayBase = 0
  dayFly = 0
  dayOwn = 0
  month = -1
  monthBase = 0
  monthFly = 0
  monthOwn = 0
  /** Last admitted or recorded call (ms), for dropping it from the sync. */
  seenAt = 0
  /** In the sync's list. */
  listed = false
  /** The connection generation in which its bases were last sent as floors (0: never). */
  floorGen = 0
  /** Its slot in the front threads' request board (board.ts), or -1 (no board, or no room on it). */
  slot = -1
  /** The board's count of the current minute already added to reqOwn. */
  boardSeen = 0
  /** The shared counters' names, built once per window. */
  namesMinute = -1
  reqName = ''
  tokName = ''
  namesDay = -1
  dayName = ''
  namesMonth = -1
  monthName = ''

  constructor (name: string) {
    this.name = name
  }
}

/** Starts the subject's windows that have ended; counts of an ended window (and what it had not synced) are dropped. */
export function roll (s: Subject, w: Windows): void {
  s.minute = w.minuteStart
  s.reqBase = s.reqFly = s.reqOwn = 0
  s.boardSeen = 0
  s.tokBase = s.tokFly = s.tokOwn = 0
  if (s.day !== w.dayStart) {
    s.day = w.dayStart
    s.dayBase = s.dayFly = s.dayOwn = 0
  }
  if (s.month !== w.monthStart) {
    s.month = w.monthStart
    s.monthBase = s.monthFly = s.monthOwn = 0
  }
}

/**
 * The sync loop: every `syncMs`, for every listed subject, adds this instance's counts since the last sync
 * to the shared counters of its current windows and reads back the totals, in one round trip, one sync at a
 * time. Deltas that surely did not reach Redis (not connected) stay in own and are sent once when it is
 * back; deltas whose answer was lost (they may have been applied) move into the local total and are never
 * sent again: nothing is counted twice, and at most one sync's worth of this instance's counts can be
 * missing from the shared total.
 */
/** What the sync needs of the limiter: its windows and clock, and its request board's two steps. */
export interface SyncClock {
  readonly windows: Windows
  readonly now: () => number
  /** Moves the windows (and starts the month's sweep). */
  readonly refresh: (now: number) => void
  /** Adds the front threads' requests counted on the board since the last fold to the subject's own. */
  readonly fold: (s: Subject) => void
  /** Tells the board the subject's requests counted elsewhere, tokens and spend (after a sync read them). */
  readonly publish: (s: Subject) => void
}

export class SharedSync {
  readonly #shared: SharedCounters
  readonly #windows: Windows
  readonly #now: () => number
  /** The limiter's refresh of the windows (which also starts its month's sweep). */
  readonly #refresh: (now: number) => void
  readonly #fold: (s: Subject) => void
  readonly #publish: (s: Subject) => void
  readonly #warn: (msg: string, fields: object) => void
  readonly #timer: NodeJS.Timeout
  #mode: Exclude<LimitsMode, 'local'> = 'fallback'
  /** A warning for the current episode of Redis being away has been given. */
  #warned = false
  /** The last sync restored counters Redis had lost (told once per episode). */
  #restoring = false
  #syncing: Promise<void> | null = null
  #closed = false
  /** Subjects touched in the last ACTIVE_MS, or with counts not yet sent. */
  readonly #listed: Subject[] = []
  readonly #batch: SyncBatch = { names: [], adds: [], floors: [], expireAtMs: [] }
  readonly #subjects: Subject[] = []
  /** Per subject in the batch: the minute, day and month it was sent for. */
  readonly #sent: number[] = []

  constructor (shared: SharedCounters, clock: SyncClock, syncMs: number, warn: (msg: string, fields: object) => void) {
    this.#shared = shared
    this.#windows = clock.windows
    this.#now = clock.now
    this.#refresh = clock.refresh
    this.#fold = clock.fold
    this.#publish = clock.publish
    this.#warn = warn
    this.#timer = setInterval(() => { this.#tick() }, syncMs)
    this.#timer.unref()
  }

  /** 'shared' once a sync has answered; 'fallback' before that and while Redis is away (own counts only). */
  get mode (): Exclude<LimitsMode, 'local'> {
    return this.#mode
  }

  list (s: Subject): void {
    s.listed = true
    this.#listed.push(s)
  }

  /** Stops the loop, sends what was counted since the last sync (bounded by the command timeout), closes Redis. */
  async close (): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    clearInterval(this.#timer)
    if (this.#syncing !== null) await this.#syncing
    if (this.#shared.state === 'ready') await this.#syncOnce()
    await this.#shared.close()
  }

  #tick (): void {
    if (this.#syncing !== null || this.#closed) return
    this.#syncing = this.#syncOnce()
      .catch((e: unknown) => { this.#toFallback(e instanceof Error ? e.message : String(e)) })
      .finally(() => { this.#syncing = null })
  }

  async #syncOnce (): Promise<void> {
    const state = this.#shared.state
    if (state === 'connecting') return
    if (state === 'down') { this.#toFallback(this.#shared.lastError ?? 'not connected'); return }
    const now = this.#now()
    const w = this.#windows
    if (now >= w.minuteEnd || now < w.minuteStart) this.#refresh(now)
    const gen = this.#shared.generation
    const batch = this.#batch
    batch.names.length = batch.adds.length = batch.floors.length = batch.expireAtMs.length = 0
    const subjects = this.#subjects
    const sent = this.#sent
    const listed = this.#listed
    let kept = 0
    for (let i = 0; i < listed.length; i++) {
      const s = listed[i]!
      if (s.minute !== w.minuteStart) roll(s, w)
      this.#fold(s)
      if (now - s.seenAt > ACTIVE_MS && s.floorGen === gen && s.reqOwn === 0 && s.tokOwn === 0 && s.dayOwn < 1 && s.monthOwn < 1) {
        s.listed = false
        continue
      }
      listed[kept++] = s
      // Redis may have lost its counters at any moment, on this connection too: what is known goes as floors.
      this.#addToBatch(s)
      subjects.push(s)
      sent.push(s.minute, s.day, s.month)
    }
    listed.length = kept
    const result = await this.#shared.sync(batch)
    for (let j = 0; j < subjects.length; j++) {
      const s = subjects[j]!
      // A window that ended during the sync was reset, fly included, by roll(): nothing to settle there.
      const minute = s.minute === sent[3 * j]
      const day = s.day === sent[3 * j + 1]
      const month = s.month === sent[3 * j + 2]
      if (result.ok) {
        const t = result.totals
        if (minute) { s.reqBase = t[4 * j]!; s.tokBase = t[4 * j + 1]!; s.reqFly = s.tokFly = 0 }
        if (day) { s.dayBase = t[4 * j + 2]!; s.dayFly = 0 }
        if (month) { s.monthBase = t[4 * j + 3]!; s.monthFly = 0 }
        s.floorGen = gen
      } else if (result.sent) {
        if (minute) { s.reqBase += s.reqFly; s.tokBase += s.tokFly; s.reqFly = s.tokFly = 0 }
        if (day) { s.dayBase += s.dayFly; s.dayFly = 0 }
        if (month) { s.monthBase += s.monthFly; s.monthFly = 0 }
      } else {
        if (minute) { s.reqOwn += s.reqFly; s.tokOwn += s.tokFly; s.reqFly = s.tokFly = 0 }
        if (day) { s.dayOwn += s.dayFly; s.dayFly = 0 }
        if (month) { s.monthOwn += s.monthFly; s.monthFly = 0 }
      }
      this.#publish(s)
    }
    subjects.length = 0
    sent.length = 0
    if (result.ok) {
      this.#restored(result.restored ?? 0)
      this.#toShared()
    } else {
      this.#toFallback(result.reason)
    }
  }

  /** Four counters per subject, in this order: requests, tokens, the day's spend, the month's spend. */
  #addToBatch (s: Subject): void {
    if (s.namesMinute !== s.minute) {
      s.reqName = `${s.name}:requests:${s.minute}`
      s.tokName = `${s.name}:tokens:${s.minute}`
      s.namesMinute = s.minute
    }
    if (s.namesDay !== s.day) { s.dayName = `${s.name}:day_microusd:${s.day}`; s.namesDay = s.day }
    if (s.namesMonth !== s.month) { s.monthName = `${s.name}:month_microusd:${s.month}`; s.namesMonth = s.month }
    s.reqFly = s.reqOwn
    s.reqOwn = 0
    s.tokFly = s.tokOwn
    s.tokOwn = 0
    // Redis holds whole micro-dollars; the fraction stays in own until it makes one.
    s.dayFly = Math.floor(s.dayOwn)
    s.dayOwn -= s.dayFly
    s.monthFly = Math.floor(s.monthOwn)
    s.monthOwn -= s.monthFly
    const b = this.#batch
    const w = this.#windows
    b.names.push(s.reqName, s.tokName, s.dayName, s.monthName)
    b.adds.push(s.reqFly, s.tokFly, s.dayFly, s.monthFly)
    b.floors.push(s.reqBase, s.tokBase, Math.round(s.dayBase), Math.round(s.monthBase))
    b.expireAtMs.push(w.minuteEnd + GRACE_MS, w.minuteEnd + GRACE_MS, w.dayEnd + GRACE_MS, w.monthEnd + GRACE_MS)
  }

  /** Told once per episode of syncs that found counters Redis had lost (each sync restores them). */
  #restored (counters: number): void {
    if (counters === 0) { this.#restoring = false; return }
    // Coming back from an outage to a Redis that restarted empty is told by the "back" line.
    if (this.#restoring || this.#mode === 'fallback') return
    this.#restoring = true
    this.#warn('limits: Redis had lost shared counts (flushed, evicted, or restarted empty); restored from what this instance knew', { counters })
  }

  #toShared (): void {
    if (this.#mode === 'shared') return
    if (this.#warned) this.#warn('limits: Redis is back; limits are shared across instances again', {})
    this.#warned = false
    this.#mode = 'shared'
  }

  #toFallback (reason: string): void {
    this.#mode = 'fallback'
    if (this.#warned) return
    this.#warned = true
    this.#warn('limits: Redis is unreachable; each instance enforces the limits on its own counts until it is back', { reason })
  }
}
