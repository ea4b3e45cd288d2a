// The one SSE reader of the tests: events split as they complete from bytes arriving piece by piece
// (LF, CRLF or CR line ends, as the spec's parser allows), or from a whole body at once.

export interface SseEvent {
  readonly event: string | null
  readonly data: string
  /** performance.now() when the bytes that completed the event arrived (0 for a whole body). */
  readonly at: number
}

/** Splits a byte stream into SSE events as they complete. */
export class SseSplitter {
  readonly events: SseEvent[] = []
  onEvent: (e: SseEvent) => void = () => {}
  #text = ''

  push (bytes: Buffer, at: number): void {
    this.#text += bytes.toString('utf8')
    for (;;) {
      const m = /\r\n\r\n|\n\n|\r\r/.exec(this.#text)
      if (m === null) return
      const block = this.#text.slice(0, m.index)
      this.#text = this.#text.slice(m.index + m[0].length)
      this.#emit(block, at)
    }
  }

  /** The bytes after the last complete event, read as a last event (a body that ended without a blank line). */
  end (at = 0): void {
    const block = this.#text
    this.#text = ''
    if (block.trim() !== '') this.#emit(block, at)
  }

  /** Bytes received after the last complete event. */
  get rest (): string {
    return this.#text
  }

  #emit (block: string, at: number): void {
    let event: string | null = null
    const data: string[] = []
    for (const line of block.split(/\r\n|\n|\r/)) {
      if (line.startsWith('event:')) event = line.slice(6).trim()
      else if (line.startsWith('data:')) data.push(line.slice(line.startsWith('data: ') ? 6 : 5))
    }
    const e: SseEvent = { event, data: data.join('\n'), at }
    this.events.push(e)
    this.onEvent(e)
  }
}

/** The events of a whole SSE body. */
export function sseEvents (text: string): SseEvent[] {
  const sse = new SseSplitter()
  sse.push(Buffer.from(text, 'utf8'), 0)
  sse.end()
  return sse.events
}

/** The JSON payloads of an SSE body's events, in order ([DONE] and empty data left out). */
export function sseData (text: string): Array<Record<string, any>> {
  return sseEvents(text).filter((e) => e.data !== '[DONE]' && e.data !== '').map((e) => JSON.parse(e.data) as Record<string, any>)
}
