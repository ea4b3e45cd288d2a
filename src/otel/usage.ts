// The token usage a span reports, read from the provider's own usage in a bounded window of the
// response the trace capture already holds: the last WINDOW bytes (where every dialect's whole answer
// and the last stream events carry it) and, for a stream, also the first WINDOW bytes (Anthropic-style
// streams report the input tokens in their first event). At most 2 × WINDOW bytes are read per call
// whatever the answer's size, so the front thread stays cheap; the trace row, which the store worker
// computes from the whole answer (with estimates when the provider reported none), stays the authority.
import type { ProviderName, ReportedUsage } from '../providers/index.js'
import type { ResponseCapture } from '../proxy/capture.js'
import { readResponse } from '../store/worker/token-usage.js'

const WINDOW = 4096

/** The last `n` bytes of a list of chunks (copied only when they span several chunks). */
function lastBytes (chunks: readonly Buffer[], n: number): Buffer[] {
  const out: Buffer[] = []
  let need = n
  for (let i = chunks.length - 1; i >= 0 && need > 0; i--) {
    const c = chunks[i]!
    out.unshift(c.length <= need ? c : c.subarray(c.length - need))
    need -= c.length
  }
  return out
}

function firstBytes (chunks: readonly Buffer[], n: number): Buffer[] {
  const out: Buffer[] = []
  let need = n
  for (const c of chunks) {
    if (need <= 0) break
    out.push(c.length <= need ? c : c.subarray(0, need))
    need -= c.length
  }
  return out
}

export function windowUsage (provider: ProviderName, streaming: boolean, c: ResponseCapture): ReportedUsage | null {
  if (c.total === 0) return null
  const all = c.tailBytes > 0 ? [...c.head, ...c.tail] : c.head
  const end = lastBytes(all, WINDOW)
  if (!streaming) return readResponse(provider, false, Buffer.concat(end)).usage
  // A short stream is read whole; a long one as its first and last windows.
  const text = c.total <= 2 * WINDOW
    ? Buffer.concat(all).toString('utf8')
    : Buffer.concat(firstBytes(c.head, WINDOW)).toString('utf8') + '\n' + Buffer.concat(end).toString('utf8')
  return readResponse(provider, true, text).usage
}
