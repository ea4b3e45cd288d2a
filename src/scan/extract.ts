// The texts a request carries, as segments with their message index, role, JSON path and who wrote them
// (application, user or data), in the order the provider module walks them (src/providers/<name>.ts
// walkRequest). The dashboard walks the same function, so a finding's segment index names the same text there.
import { DIALECTS, type ProviderName, type RequestSink } from '../providers/index.js'
import { asObject } from '../providers/json.js'
import { roleSource, type SpanSource } from '../providers/types.js'
import type { Segment } from '../detection/types.js'

class Segments implements RequestSink {
  readonly full = false
  readonly out: Segment[] = []

  get size (): number {
    return this.out.length
  }

  text (message: number, role: string, path: string, text: unknown, _label?: string | null, _display?: string | null, _code?: boolean, source?: SpanSource): boolean {
    if (typeof text !== 'string' || text === '') return false
    this.out.push({ message, role, path, text, source: source ?? roleSource(role) })
    return true
  }

  other (): void {}
}

export function extractSegments (provider: ProviderName, body: unknown): Segment[] {
  const b = asObject(body)
  if (b === null) return []
  const sink = new Segments()
  DIALECTS[provider].walkRequest(b, sink)
  return sink.out
}
