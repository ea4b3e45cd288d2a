// The detection worker (run by piscina in src/detection/pool.ts): for each body of a batch, parses it,
// takes the text its dialect carries, and runs every detector over it. Injection decides the verdict;
// PII and secrets are recorded as issues and never block.
import { performance } from 'node:perf_hooks'
import type { DetectTask, Verdict } from '../src/detection/types.js'
import { extractSegments } from './detector/extract.js'
import { detectInjection } from './detector/injection.js'
import { findPii } from './detector/pii.js'
import { findSecrets } from './detector/secrets.js'

const NO_CATEGORIES: readonly string[] = Object.freeze([])

/** One forwarded body, as UTF-8 text, judged. */
export function detectBody (provider: 'alpha' | 'beta' | 'gamma', json: string): Verdict {
  const t0 = performance.now()
  let body: unknown = null
  try {
    body = JSON.parse(json)
  } catch {
    // The front thread only forwards valid JSON; an unreadable body has no text to judge.
  }
  const segments = extractSegments(provider, body)
  const injection = detectInjection(segments)
  const pii = findPii(segments)
  const secrets = findSecrets(segments)
  const issues = pii.length === 0 && secrets.length === 0 ? injection.issues : [...injection.issues, ...pii, ...secrets]
  return {
    blocked: injection.blocked,
    score: injection.score,
    categories: injection.categories.length === 0 ? NO_CATEGORIES : injection.categories,
    issues,
    ms: Math.round((performance.now() - t0) * 1000) / 1000,
  }
}

export default function detect (task: DetectTask): Verdict[] {
  const bytes = Buffer.from(task.body.buffer, task.body.byteOffset, task.body.byteLength)
  const out: Verdict[] = new Array(task.ends.length)
  let start = 0
  for (let k = 0; k < task.ends.length; k++) {
    const end = task.ends[k] as number
    out[k] = detectBody(task.providers[k] ?? 'alpha', bytes.toString('utf8', start, end))
    start = end
  }
  return out
}
