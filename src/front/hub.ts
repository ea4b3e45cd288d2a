// Calls between the main thread and a front thread over one port, both ways: requests answered by a
// promise, and notes that want no answer. What a side sends in one turn of its event loop leaves as one
// message (a postMessage costs tens of µs; a burst of requests pays it once), moved buffers included.
// Each side is typed by its table (protocol.ts): what it answers and the notes it takes, so tsc checks
// that a side answers every operation the other may ask, with the types the asker expects.
import type { MessagePort, Worker } from 'node:worker_threads'

/** One side of a hub: the operations it answers (name → argument and result) and the notes it takes (name → argument). */
export interface Side {
  readonly serves: Readonly<Record<string, { readonly args: unknown; readonly result: unknown }>>
  readonly hears: Readonly<Record<string, unknown>>
}

/** A handler for each operation a side answers: its result, or a promise of it. */
export type Handlers<S extends Side> = {
  readonly [K in keyof S['serves']]: (args: S['serves'][K]['args']) => S['serves'][K]['result'] | Promise<S['serves'][K]['result']>
}

/** A handler for each note a side takes. */
export type NoteHandlers<S extends Side> = {
  readonly [K in keyof S['hears']]: (args: S['hears'][K]) => void
}

/** What crosses the port: operation names are checked by the tables on both ends, not here. */
type Item =
  | { readonly k: 'req'; readonly id: number; readonly op: string; readonly args: unknown }
  | { readonly k: 'ok'; readonly id: number; readonly value: unknown }
  | { readonly k: 'err'; readonly id: number; readonly message: string }
  | { readonly k: 'note'; readonly op: string; readonly args: unknown }

/** One turn's items. */
export interface HubMessage {
  readonly hub: readonly Item[]
}

type Untyped = Readonly<Record<string, ((args: unknown) => unknown) | undefined>>

interface Pending {
  resolve (value: unknown): void
  reject (err: Error): void
}

export class HubError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'HubError'
  }
}

/** `Mine`: what this side answers and hears; `Theirs`: what the other side does, so what this one may ask and tell. */
export class Hub<Mine extends Side, Theirs extends Side> {
  readonly #port: MessagePort | Worker
  readonly #handlers: Untyped
  readonly #notes: Untyped
  readonly #pending = new Map<number, Pending>()
  #nextId = 1
  #out: Item[] = []
  #transfer: ArrayBuffer[] = []
  #scheduled = false
  #gone: string | null = null
  readonly #flush = (): void => { this.flush() }

  constructor (port: MessagePort | Worker, handlers: Handlers<Mine>, notes: NoteHandlers<Mine>) {
    this.#port = port
    this.#handlers = handlers as Untyped
    this.#notes = notes as Untyped
    port.on('message', (msg: unknown) => {
      if (typeof msg === 'object' && msg !== null && 'hub' in msg) this.#receive((msg as HubMessage).hub)
    })
  }

  /** Asks the other side; rejects when it answers with an error or is gone. */
  request<K extends keyof Theirs['serves'] & string> (op: K, args: Theirs['serves'][K]['args'], transfer?: ArrayBuffer): Promise<Theirs['serves'][K]['result']> {
    if (this.#gone !== null) return Promise.reject(new HubError(this.#gone))
    const id = this.#nextId++
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
      this.#push({ k: 'req', id, op, args }, transfer)
    })
  }

  note<K extends keyof Theirs['hears'] & string> (op: K, args: Theirs['hears'][K]): void {
    if (this.#gone === null) this.#push({ k: 'note', op, args })
  }

  /** Sends what this turn queued now (before a close, say). */
  flush (): void {
    this.#scheduled = false
    if (this.#out.length === 0 || this.#gone !== null) return
    const msg: HubMessage = { hub: this.#out }
    const transfer = this.#transfer
    this.#out = []
    this.#transfer = []
    this.#port.postMessage(msg, transfer)
  }

  /** The other side is gone (its thread exited): what waits for it fails, and nothing more is sent. */
  gone (why: string): void {
    if (this.#gone !== null) return
    this.#gone = why
    this.#out = []
    this.#transfer = []
    for (const p of this.#pending.values()) p.reject(new HubError(why))
    this.#pending.clear()
  }

  #push (item: Item, transfer?: ArrayBuffer): void {
    this.#out.push(item)
    if (transfer !== undefined) this.#transfer.push(transfer)
    if (!this.#scheduled) {
      this.#scheduled = true
      // After the poll phase: every request of this burst leaves in the same message.
      setImmediate(this.#flush)
    }
  }

  #receive (items: readonly Item[]): void {
    for (const item of items) {
      switch (item.k) {
        case 'req': this.#serve(item.id, item.op, item.args); break
        case 'note': this.#notes[item.op]?.(item.args); break
        case 'ok': this.#settle(item.id)?.resolve(item.value); break
        case 'err': this.#settle(item.id)?.reject(new HubError(item.message)); break
      }
    }
  }

  #settle (id: number): Pending | undefined {
    const p = this.#pending.get(id)
    this.#pending.delete(id)
    return p
  }

  #serve (id: number, op: string, args: unknown): void {
    const handler = this.#handlers[op]
    if (handler === undefined) { this.#push({ k: 'err', id, message: `no such call: ${op}` }); return }
    let value: unknown
    try {
      value = handler(args)
    } catch (err) {
      this.#push({ k: 'err', id, message: err instanceof Error ? err.message : String(err) })
      return
    }
    if (value instanceof Promise) {
      value.then((v: unknown) => { this.#push({ k: 'ok', id, value: v }) }, (err: unknown) => {
        this.#push({ k: 'err', id, message: err instanceof Error ? err.message : String(err) })
      })
    } else {
      this.#push({ k: 'ok', id, value })
    }
  }
}
