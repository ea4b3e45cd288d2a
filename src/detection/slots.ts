// Slots shared by the bulk lanes of every front thread's pool (TRACEGATE_THREADS above 1): a lane takes one
// before its worker starts on a large body and gives it back after, so the threads together never judge
// more large bodies at once than one pool would, and a flood of them leaves the other cores to chat turns
// and the proxy. One Int32 in a SharedArrayBuffer: the slots in use, changed only by compare-and-swap.

export class SharedSlots {
  readonly #used: Int32Array
  readonly max: number

  /** `buffer`: from SharedSlots.buffer(), the same for every thread; `max`: how many may be taken at once. */
  constructor (buffer: SharedArrayBuffer, max: number) {
    this.#used = new Int32Array(buffer)
    this.max = max
  }

  static buffer (): SharedArrayBuffer {
    return new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT)
  }

  /** Takes a slot when one is free. */
  take (): boolean {
    for (;;) {
      const used = Atomics.load(this.#used, 0)
      if (used >= this.max) return false
      if (Atomics.compareExchange(this.#used, 0, used, used + 1) === used) return true
    }
  }

  give (): void {
    Atomics.sub(this.#used, 0, 1)
  }

  /** Slots taken now, by every thread. */
  get used (): number {
    return Atomics.load(this.#used, 0)
  }
}
