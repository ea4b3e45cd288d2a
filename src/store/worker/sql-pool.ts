// The SQL port's ClickHouse connections. Embedded, chDB runs one query at a time per connection, so the
// port has connections of its own (never the store's: a heavy query would hold up trace inserts and the
// dashboard), up to `size`, made on first use. A query waiting for one is served in turn by account:
// each free connection goes to the next account waiting, so an account with many queries never keeps
// another's waiting longer than one query per account ahead of it.
import type { ClickHouseClient } from '@clickhouse/client'

type Waiter = (client: ClickHouseClient) => void

export class SqlPool {
  readonly #make: () => Promise<ClickHouseClient>
  readonly #size: number
  readonly #free: ClickHouseClient[] = []
  readonly #all = new Set<ClickHouseClient>()
  #making = 0
  /** Waiting queries by account, in the order the accounts are served (one taken moves it to the end). */
  readonly #waiting = new Map<string, Waiter[]>()
  #closed = false

  constructor (make: () => Promise<ClickHouseClient>, size: number) {
    this.#make = make
    this.#size = size
  }

  async run<T> (accountId: string, fn: (client: ClickHouseClient) => Promise<T>): Promise<T> {
    const client = await this.#take(accountId)
    try {
      return await fn(client)
    } finally {
      this.#give(client)
    }
  }

  async #take (accountId: string): Promise<ClickHouseClient> {
    if (this.#closed) throw new Error('the SQL connections are closed')
    const free = this.#free.pop()
    if (free !== undefined) return free
    if (this.#all.size + this.#making < this.#size) {
      this.#making++
      try {
        const client = await this.#make()
        this.#all.add(client)
        return client
      } finally {
        this.#making--
      }
    }
    return new Promise((resolve) => {
      const list = this.#waiting.get(accountId)
      if (list === undefined) this.#waiting.set(accountId, [resolve])
      else list.push(resolve)
    })
  }

  #give (client: ClickHouseClient): void {
    if (this.#closed) { void client.close().catch(() => {}); return }
    const next = this.#waiting.entries().next()
    if (next.done === true) { this.#free.push(client); return }
    const [accountId, list] = next.value
    const waiter = list.shift()!
    this.#waiting.delete(accountId)
    if (list.length > 0) this.#waiting.set(accountId, list)
    waiter(client)
  }

  /** Closes the free connections now and each busy one when its query ends. */
  async close (): Promise<void> {
    this.#closed = true
    const free = this.#free.splice(0)
    await Promise.all(free.map((c) => c.close().catch(() => {})))
  }
}
