// The detection worker (run by piscina in src/detection/pool.ts): parses the forwarded body, takes the
// text its dialect carries, and runs every detector over it. Injection decides the verdict; PII and
// secrets are recorded as issues and never block.
import { performance } from 'node:perf_hooks'
import type { DetectTask, Verdict } from '../src/detection/types.js'
import { extractSegments } from './detector/extract.js'
import { detectInjection } from './detector/injection.js'
import { findPii } from './detector/pii.js'
import { findSecrets } from './detector/secrets.js'

export default function detect (task: DetectTask): Verdict {
  const t0 = performance.now()
  let body: unknown = null
  try {
    body = JSON.parse(Buffer.from(task.body.buffer, task.body.byteOffset, task.body.byteLength).toString('utf8'))
  } catch {
    // The front thread only forwards valid JSON; an unreadable body has no text to judge.
  }
  const segments = extractSegments(task.provider, body)
  const injection = detectInjection(segments)
  const issues = [...injection.issues, ...findPii(segments), ...findSecrets(segments)]
  return {
    blocked: injection.blocked,
    score: injection.score,
    categories: injection.categories,
    issues,
    ms: Math.round((performance.now() - t0) * 1000) / 1000,
  }
}
