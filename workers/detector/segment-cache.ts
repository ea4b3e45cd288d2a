// The PII and secret findings of each segment text, kept per worker thread and bounded. A chat resends
// its system prompt and history with every call: with this and the injection analyses injection.ts
// keeps, a call pays the scans only for text not seen before. Findings are a pure function of the text;
// the segment index and message number they carry are set for each request that uses them.
import type { Issue, Segment } from '../../src/detection/types.js'
import { findPii } from '../../src/scan/pii.js'
import { findSecrets } from '../../src/scan/secrets.js'
import { TextCache } from './text-cache.js'

interface Found {
  readonly pii: readonly Issue[]
  readonly secrets: readonly Issue[]
}

const NONE: readonly Issue[] = Object.freeze([])
const NOTHING: Found = Object.freeze({ pii: NONE, secrets: NONE })

/** As much text as injection.ts keeps analyses of; texts longer than a long chat turn are scanned every time. */
const CACHE = new TextCache<Found>(4_000_000, 65_536)
let cacheOn = true

/** Benchmarks compare against scanning every segment every time. */
export function setSegmentCache (on: boolean): void {
  cacheOn = on
  CACHE.clear()
}

function scan (text: string): Found {
  const one: Segment[] = [{ message: 0, role: '', path: '', text }]
  const pii = findPii(one)
  const secrets = findSecrets(one)
  return pii.length === 0 && secrets.length === 0 ? NOTHING : { pii: pii.length === 0 ? NONE : pii, secrets: secrets.length === 0 ? NONE : secrets }
}

/** Issues of one text found as segment 0, message 0, placed at segment `i` of `seg.message`. */
function place (issues: readonly Issue[], i: number, seg: Segment, out: Issue[]): void {
  for (const issue of issues) out.push({ ...issue, segment: i, message: seg.message })
}

/** The PII and secret issues of the segments, as findPii and findSecrets would list them. */
export function findPiiAndSecrets (segments: readonly Segment[]): { pii: Issue[]; secrets: Issue[] } {
  if (!cacheOn) return { pii: findPii(segments), secrets: findSecrets(segments) }
  const pii: Issue[] = []
  const secrets: Issue[] = []
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i] as Segment
    const found = CACHE.get(seg.text, scan)
    if (found === NOTHING) continue
    place(found.pii, i, seg, pii)
    place(found.secrets, i, seg, secrets)
  }
  return { pii, secrets }
}
