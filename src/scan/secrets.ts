// Secret detection over prompt segments: provider API keys, PEM private keys, JWTs. One prefilter regex
// of literal prefixes finds where a key could start; only there does a sticky, bounded regex for that
// provider run, so the cost on ordinary prose is one linear pass.
import { Buffer } from 'node:buffer'
import type { Issue, Segment, Severity } from '../detection/types.js'
import { maskKey, tail } from './mask.js'

interface Rule {
  readonly kind: string
  /** Label in the masked detail, e.g. `openai key`. */
  readonly label: string
  /** The sticky pattern; group 1, when present, is the fixed prefix kept in the masked detail. */
  readonly re: RegExp
  /** Extra check on the matched value (character mix of random keys, a JWT header). */
  readonly check?: (value: string) => boolean
  readonly severity: Severity
}

const TOKEN = /[A-Za-z0-9_-]/

/** Random keys mix cases and digits; prose such as `sk-learn-is-a-library` does not. */
function mixed (value: string): boolean {
  return /[a-z]/.test(value) && /[A-Z]/.test(value) && /\d/.test(value)
}

const rule = (kind: string, label: string, re: RegExp, check?: (value: string) => boolean, severity: Severity = 'high'): Rule =>
  check === undefined ? { kind, label, re, severity } : { kind, label, re, check, severity }

// Keyed by what the prefilter matched; tried in order, first match wins.
const RULES: Readonly<Record<string, readonly Rule[]>> = {
  'sk-': [
    rule('anthropic_key', 'anthropic key', /(sk-ant-)[A-Za-z0-9_-]{32,300}/y, mixed),
    rule('openai_key', 'openai key', /(sk-(?:proj|svcacct|admin)-)[A-Za-z0-9_-]{40,300}/y, mixed),
    rule('openai_key', 'openai key', /(sk-)[A-Za-z0-9_-]{32,300}/y, mixed)
  ],
  sk_live_: [rule('stripe_key', 'stripe key', /(sk_live_)[A-Za-z0-9]{20,255}/y)],
  rk_live_: [rule('stripe_key', 'stripe restricted key', /(rk_live_)[A-Za-z0-9]{20,255}/y)],
  AIza: [rule('google_api_key', 'google api key', /(AIza)[A-Za-z0-9_-]{35}/y)],
  AKIA: [rule('aws_access_key_id', 'aws access key id', /(AKIA)[A-Z0-9]{16}/y)],
  ASIA: [rule('aws_access_key_id', 'aws temporary access key id', /(ASIA)[A-Z0-9]{16}/y)],
  gh: [rule('github_token', 'github token', /(gh[pousr]_)[A-Za-z0-9]{36,255}/y)],
  github_pat_: [rule('github_token', 'github token', /(github_pat_)[A-Za-z0-9_]{22,255}/y)],
  'glpat-': [rule('gitlab_token', 'gitlab token', /(glpat-)[A-Za-z0-9_-]{20,255}/y)],
  xox: [rule('slack_token', 'slack token', /(xox[baprs]-)[A-Za-z0-9-]{10,250}/y, (v) => /\d/.test(v))],
  hf_: [rule('huggingface_token', 'hugging face token', /(hf_)[A-Za-z0-9]{30,40}/y, (v) => /[a-z]/.test(v) && /[A-Z]/.test(v))],
  tgk_: [rule('tracegate_key', 'tracegate key', /(tgk_)[A-Za-z0-9_-]{43}/y)],
  eyJ: [rule('jwt', 'jwt', /eyJ[A-Za-z0-9_-]{8,4000}\.[A-Za-z0-9_-]{2,16000}\.[A-Za-z0-9_-]{0,4000}/y, jwtHeader, 'medium')]
}

const PREFIX = /sk-|[sr]k_live_|AIza|AKIA|ASIA|gh[pousr]_|github_pat_|glpat-|xox[baprs]-|hf_|tgk_|eyJ|-----BEGIN /g
const PEM = /-----BEGIN ([A-Z0-9 ]{0,40})PRIVATE KEY(?: BLOCK)?-----/y
const AWS_SECRET = /(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])/g
/** How far from an access key id its secret may sit (a config file, an env listing). */
const AWS_NEAR = 300

export function findSecrets (segments: readonly Segment[]): Issue[] {
  const issues: Issue[] = []
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]
    if (segment === undefined) continue
    const found: Issue[] = []
    const add = (kind: string, severity: Severity, detail: string, start: number, end: number): void => {
      found.push({ category: 'secret', kind, severity, detail, segment: i, message: segment.message, span: [start, end] })
    }
    scan(segment.text, add)
    found.sort((a, b) => a.span[0] - b.span[0])
    for (const issue of found) issues.push(issue)
  }
  return issues
}

type Add = (kind: string, severity: Severity, detail: string, start: number, end: number) => void

function scan (text: string, add: Add): void {
  PREFIX.lastIndex = 0
  let awsSecrets: Set<number> | undefined
  let m: RegExpExecArray | null
  while ((m = PREFIX.exec(text)) !== null) {
    const start = m.index
    const prefix = m[0]
    if (prefix === '-----BEGIN ') {
      const end = privateKey(text, start, add)
      if (end > start) PREFIX.lastIndex = end
      continue
    }
    // A key starts a token: `task-…` or `mask_live_…` are not keys.
    if (start > 0 && TOKEN.test(text[start - 1] ?? '')) continue
    const rules = RULES[prefix.startsWith('gh') && prefix.length === 4 ? 'gh' : prefix.startsWith('xox') ? 'xox' : prefix]
    if (rules === undefined) continue
    for (const r of rules) {
      r.re.lastIndex = start
      const hit = r.re.exec(text)
      if (hit === null) continue
      const end = start + hit[0].length
      // Still going at the pattern's length limit: some other, longer token.
      if (end < text.length && TOKEN.test(text[end] ?? '')) continue
      // A fourth dotted part: not a JWT (a sentence's full stop is fine).
      if (r.kind === 'jwt' && text[end] === '.' && TOKEN.test(text[end + 1] ?? '')) continue
      const value = hit[0]
      if (r.check !== undefined && !r.check(value)) continue
      const detail = r.kind === 'jwt' ? `jwt${jwtAlg(value)} …${tail(value)}` : maskKey(r.label, hit[1] ?? '', value)
      add(r.kind, r.severity, detail, start, end)
      if (r.kind === 'aws_access_key_id') {
        awsSecrets ??= new Set()
        awsSecret(text, start, end, awsSecrets, add)
      }
      PREFIX.lastIndex = end
      break
    }
  }
}

/** A 40-character secret access key within AWS_NEAR characters of an access key id. */
function awsSecret (text: string, keyStart: number, keyEnd: number, seen: Set<number>, add: Add): void {
  const from = Math.max(0, keyStart - AWS_NEAR)
  const window = text.slice(from, Math.min(text.length, keyEnd + AWS_NEAR))
  AWS_SECRET.lastIndex = 0
  let m: RegExpExecArray | null
  while ((m = AWS_SECRET.exec(window)) !== null) {
    const start = from + m.index
    // Random base64: mixed case and digits (a 40-letter word or hex digest is not it).
    if (seen.has(start) || !mixed(m[0])) continue
    seen.add(start)
    add('aws_secret_key', 'high', `aws secret key …${tail(m[0])}`, start, start + 40)
  }
}

/** The whole block through its END line (or, cut off, the base64 body that follows). */
function privateKey (text: string, start: number, add: Add): number {
  PEM.lastIndex = start
  const m = PEM.exec(text)
  if (m === null) return start
  const type = (m[1] ?? '').trim()
  const headerEnd = start + m[0].length
  let end: number
  const close = text.indexOf('-----END ', headerEnd)
  const closeEnd = close === -1 ? -1 : text.indexOf('-----', close + 9)
  if (closeEnd !== -1) {
    end = closeEnd + 5
  } else {
    end = headerEnd
    while (end < text.length && /[A-Za-z0-9+/=\r\n]/.test(text[end] ?? '')) end++
  }
  add('private_key', 'high', type === '' ? 'private key' : `private key (${type})`, start, end)
  return end
}

/** RFC 7519: the first part is base64url JSON with an "alg" member. */
function jwtHeader (value: string): boolean {
  return jwtAlg(value) !== ''
}

function jwtAlg (value: string): string {
  const header = value.slice(0, value.indexOf('.'))
  try {
    const parsed: unknown = JSON.parse(Buffer.from(header, 'base64url').toString('utf8'))
    if (typeof parsed !== 'object' || parsed === null) return ''
    const alg = (parsed as { alg?: unknown }).alg
    return typeof alg === 'string' ? ` (${alg.slice(0, 16)})` : ''
  } catch {
    return ''
  }
}
