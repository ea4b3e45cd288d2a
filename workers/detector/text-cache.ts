// A bounded cache of values computed from a text, for the detection worker's per-segment work
// (injection.ts analyses, segment-cache.ts PII and secret findings, spans.ts pasted ranges).

/**
 * Values by text, bounded by the characters held: two generations instead of an exact LRU, whose
 * per-insert eviction costs more than the lookups save. A hit in the old one moves to the young one;
 * when the young one holds half the budget it becomes the old one and the old one is dropped.
 */
export class TextCache<V> {
  #young = new Map<string, V>()
  #old = new Map<string, V>()
  #youngChars = 0
  constructor (readonly maxChars: number, readonly maxText: number) {}

  /** The value for `text`, computed by `make` when it is not held (or too long to keep). */
  get (text: string, make: (text: string) => V): V {
    if (text.length > this.maxText) return make(text)
    let v = this.#young.get(text)
    if (v !== undefined) return v
    v = this.#old.get(text) ?? make(text)
    this.#young.set(text, v)
    this.#youngChars += text.length
    if (this.#youngChars > this.maxChars / 2) {
      this.#old = this.#young
      this.#young = new Map()
      this.#youngChars = 0
    }
    return v
  }

  clear (): void {
    this.#young = new Map()
    this.#old = new Map()
    this.#youngChars = 0
  }
}
