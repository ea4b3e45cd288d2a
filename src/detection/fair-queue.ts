// Requests waiting for a detection worker, one first-in-first-out line per account, served round-robin
// between accounts: whatever one account has waiting, another's next request is at most one turn away.
// Requests answered while they wait (their deadline passed) stay in their line, marked settled, and are
// skipped when their turn comes, so a deadline costs no search.

/** What waits: the account it is counted against, and whether it was answered already. */
export interface Waiting {
  readonly account: string
  readonly bytes: number
  readonly settled: boolean
}

/** One account's line; `head` moves instead of shifting the array. */
class Line<T> {
  items: T[] = []
  head = 0
}

export class FairQueue<T extends Waiting> {
  /** Accounts with something waiting, in the order of their next turn (a Map keeps insertion order). */
  readonly #lines = new Map<string, Line<T>>()

  push (item: T): void {
    let line = this.#lines.get(item.account)
    if (line === undefined) {
      line = new Line<T>()
      this.#lines.set(item.account, line)
    }
    line.items.push(item)
  }

  /**
   * The next request not yet answered, from the account whose turn it is; that account's turn then
   * goes to the back. `fits` may refuse the candidate (a batch that is full in bytes): it stays first
   * in its line and the turn does not move.
   */
  take (fits: (item: T) => boolean = () => true): T | null {
    for (const [account, line] of this.#lines) {
      while (line.head < line.items.length && (line.items[line.head] as T).settled) line.head++
      if (line.head === line.items.length) {
        this.#lines.delete(account)
        continue
      }
      const item = line.items[line.head] as T
      if (!fits(item)) return null
      line.head++
      this.#lines.delete(account)
      if (line.head < line.items.length) {
        // Compact now and then, so a long-lived busy line does not keep every request it ever held.
        if (line.head > 64 && line.head * 2 > line.items.length) { line.items = line.items.slice(line.head); line.head = 0 }
        this.#lines.set(account, line)
      }
      return item
    }
    return null
  }

  /** The latest request of `account` still waiting here, or null. */
  newest (account: string): T | null {
    const line = this.#lines.get(account)
    if (line === undefined) return null
    for (let i = line.items.length - 1; i >= line.head; i--) {
      const item = line.items[i] as T
      if (!item.settled) return item
    }
    return null
  }

  /** Every request still waiting (to answer those past their deadline, or all of them at close). */
  * waiting (): Generator<T> {
    for (const line of this.#lines.values()) {
      for (let i = line.head; i < line.items.length; i++) {
        const item = line.items[i] as T
        if (!item.settled) yield item
      }
    }
  }

  clear (): void {
    this.#lines.clear()
  }
}

/**
 * How many requests each account has waiting, over every line of the pool. The pool's bound is shared:
 * when it is full, the account holding the most gives up its latest request to one that holds fewer
 * (the longest line drops), so a flood fills only its own share and never locks another account out.
 */
export class Shares {
  readonly #counts = new Map<string, number>()
  #total = 0

  get total (): number { return this.#total }

  of (account: string): number { return this.#counts.get(account) ?? 0 }

  add (account: string): void {
    this.#counts.set(account, this.of(account) + 1)
    this.#total++
  }

  remove (account: string): void {
    const n = this.of(account) - 1
    if (n <= 0) this.#counts.delete(account)
    else this.#counts.set(account, n)
    this.#total--
  }

  /** The account holding the most waiting requests, or null when none wait. */
  largest (): string | null {
    let best: string | null = null
    let most = 0
    for (const [account, n] of this.#counts) if (n > most) { most = n; best = account }
    return best
  }
}
