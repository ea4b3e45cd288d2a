// What the front thread keeps of a response for its trace: references to the chunks (no copy) up to
// the capture limit, and a bounded tail after it, because a stream reports its usage at the very end.
// For streams it also notes when each chunk arrived, so the store can find the time to first token.

/** Bytes kept from the end of a response longer than the capture limit. */
export const TAIL_BYTES = 64 * 1024
/** Chunk timing marks kept per stream (pairs), enough for any realistic answer. */
const MAX_MARKS = 20_000

export class ResponseCapture {
  readonly head: Buffer[] = []
  headBytes = 0
  readonly tail: Buffer[] = []
  tailBytes = 0
  total = 0
  readonly marks: number[] | null
  readonly #limit: number

  constructor (limit: number, streaming: boolean) {
    this.#limit = limit
    this.marks = streaming ? [] : null
  }

  add (chunk: Buffer, sinceStartMs: number): void {
    this.total += chunk.length
    if (this.marks !== null && this.marks.length < MAX_MARKS) this.marks.push(this.total, sinceStartMs)
    const room = this.#limit - this.headBytes
    if (room > 0) {
      if (chunk.length <= room) {
        this.head.push(chunk)
        this.headBytes += chunk.length
        return
      }
      this.head.push(chunk.subarray(0, room))
      this.headBytes += room
      chunk = chunk.subarray(room)
    }
    this.tail.push(chunk)
    this.tailBytes += chunk.length
    while (this.tail.length > 1 && this.tailBytes - this.tail[0]!.length >= TAIL_BYTES) {
      this.tailBytes -= this.tail.shift()!.length
    }
  }
}
