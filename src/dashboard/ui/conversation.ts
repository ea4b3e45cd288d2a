// The conversation of a stored request, as parts the detail page renders by role. The provider module's
// walkRequest visits the texts in the order the detector numbers them (src/scan/extract.ts
// walks the same function), so a finding's segment index points at the right part; what the detector
// does not read (images, thinking, empty tool results) comes as parts without a segment number.
import { DIALECTS, isProviderName, type RequestSink } from './providers/index.js'
import { asObject, show } from './providers/json.js'

export interface Part {
  /** The message's index in the request; -1 for a system prompt outside the list. */
  readonly message: number
  /** `system`, `user`, `assistant`, `tool`, `developer`, … (tool results carry `tool`). */
  readonly role: string
  /** What the part is when it is not plain message text: `tool call get_weather`, `image`, … */
  readonly label: string | null
  readonly text: string
  /** The detector's segment index when `text` is a segment, else null. */
  readonly segment: number | null
  /** Shown instead of `text` when no finding points into it (a function response as JSON). */
  readonly display: string | null
  /** Monospace: JSON or tool arguments. */
  readonly code: boolean
}

class Parts implements RequestSink {
  readonly full = true
  readonly parts: Part[] = []
  #segment = 0

  get size (): number {
    return this.parts.length
  }

  text (message: number, role: string, _path: string, text: unknown, label: string | null = null, display: string | null = null, code = false): boolean {
    if (typeof text !== 'string' || text === '') return false
    this.parts.push({ message, role, label, text, segment: this.#segment++, display, code })
    return true
  }

  other (message: number, role: string, label: string | null, value: unknown): void {
    this.parts.push({ message, role, label, text: show(value), segment: null, display: null, code: typeof value !== 'string' })
  }
}

/** The request's parts in order, or null when the body is not a JSON object (cut, or not JSON). */
export function conversation (provider: string, body: unknown): Part[] | null {
  const b = asObject(body)
  if (b === null || !isProviderName(provider)) return null
  const sink = new Parts()
  DIALECTS[provider].walkRequest(b, sink)
  return sink.parts
}

/** Parts grouped into messages: consecutive parts of one message index and one role. */
export function messages (parts: readonly Part[]): Array<{ message: number, role: string, parts: Part[] }> {
  const out: Array<{ message: number, role: string, parts: Part[] }> = []
  for (const p of parts) {
    const last = out[out.length - 1]
    if (last !== undefined && last.message === p.message && last.role === p.role) last.parts.push(p)
    else out.push({ message: p.message, role: p.role, parts: [p] })
  }
  return out
}
