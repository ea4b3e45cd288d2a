// /traces/{id}: one trace to the last detail. The conversation is drawn from the stored request per
// dialect, findings are marked in its text, and everything from the trace is set as text.
import { ApiError, get } from './api.js'
import { conversation, messages, type Part } from './conversation.js'
import { h, replace, type Child } from './dom.js'
import { bytes, fullTime, int, ms, score, usd, usdTitle } from './format.js'
import { parse, prettyJson } from './json.js'
import type { Page } from './main.js'
import { answer } from './response.js'
import { sessionHref } from './sessions.js'
import type { ApiKey, Finding, TraceDetail } from './types.js'

interface Span { start: number, end: number, findings: Finding[] }

/** The findings' spans within one text, clamped, sorted and merged where they overlap. */
function spans (text: string, findings: readonly Finding[]): Span[] {
  const list: Span[] = []
  for (const f of findings) {
    const [a, b] = Array.isArray(f.span) ? f.span : [0, 0]
    const start = Math.max(0, Math.min(text.length, Number(a)))
    const end = Math.max(start, Math.min(text.length, Number(b)))
    if (end > start) list.push({ start, end, findings: [f] })
  }
  list.sort((x, y) => x.start - y.start || y.end - x.end)
  const merged: Span[] = []
  for (const s of list) {
    const last = merged[merged.length - 1]
    if (last !== undefined && s.start < last.end) {
      last.end = Math.max(last.end, s.end)
      last.findings.push(...s.findings)
    } else {
      merged.push(s)
    }
  }
  return merged
}

/** Text with the flagged spans as <mark> elements; every piece is a text node. */
let marks = 0
const size = (s: string): number => new TextEncoder().encode(s).length

export function highlighted (text: string, findings: readonly Finding[], ids: Map<Finding, string>): DocumentFragment {
  const frag = document.createDocumentFragment()
  let at = 0
  for (const s of spans(text, findings)) {
    if (s.start > at) frag.appendChild(document.createTextNode(text.slice(at, s.start)))
    const first = s.findings[0]!
    const mark = h('mark', {
      'data-testid': 'finding-span',
      'data-category': first.category,
      class: `sev-${first.severity}`,
      title: s.findings.map((f) => `${f.category}: ${f.kind} (${f.severity})`).join('\n'),
    }, text.slice(s.start, s.end))
    mark.id = `finding-span-${marks++}`
    for (const f of s.findings) if (!ids.has(f)) ids.set(f, mark.id)
    frag.appendChild(mark)
    at = s.end
  }
  if (at < text.length) frag.appendChild(document.createTextNode(text.slice(at)))
  return frag
}

function partEl (p: Part, findings: readonly Finding[], ids: Map<Finding, string>): HTMLElement {
  const mine = p.segment === null ? [] : findings.filter((f) => f.segment === p.segment)
  const text = mine.length === 0 && p.display !== null ? p.display : p.text
  const el = h('div', { class: `part${p.code || (mine.length === 0 && p.display !== null) ? ' code' : ''}`, 'data-label': p.label })
  el.appendChild(mine.length === 0 ? document.createTextNode(text) : highlighted(text, mine, ids))
  return el
}

function conversationEl (t: TraceDetail, findings: readonly Finding[], ids: Map<Finding, string>): HTMLElement {
  const box = h('div', { class: 'conversation', 'data-testid': 'conversation' })
  if (t.confidential) {
    box.appendChild(h('p', { class: 'muted' }, 'Confidential: the conversation was not stored.'))
    return box
  }
  const p = parse(t.prompt)
  const parts = p.ok ? conversation(t.provider, p.value) : null
  if (parts === null) {
    box.appendChild(h('p', { class: 'muted' }, t.prompt === ''
      ? 'No request body was stored.'
      : t.prompt_truncated
        ? `The stored request was cut at the capture limit (${bytes(size(t.prompt))} of ${bytes(t.request_bytes)}), so it cannot be read as messages. It is shown raw below.`
        : 'The request is not a JSON object; it is shown raw below.'))
    return box
  }
  if (parts.length === 0) box.appendChild(h('p', { class: 'muted' }, 'The request carries no messages.'))
  for (const m of messages(parts)) {
    box.appendChild(h('div', {
      class: `message role-${/^[a-z_]+$/.test(m.role) ? m.role : 'other'}`,
      'data-testid': 'message',
      'data-role': m.role,
      'data-message': m.message,
    }, ...m.parts.map((x) => partEl(x, findings, ids))))
  }
  return box
}

function stat (label: string, testid: string, value: string, sub?: Child, title: string | null = null): HTMLElement {
  return h('div', { class: 'stat' }, h('dt', null, label), h('dd', null, h('span', { 'data-testid': testid, title }, value), sub))
}

/** What the caller said about the call (x-tracegate-* headers), or null when it said nothing. */
function labelsEl (t: TraceDetail): HTMLElement | null {
  // A server from before the labels answers without these fields.
  const user = typeof t.user === 'string' ? t.user : ''
  const session = typeof t.session === 'string' ? t.session : ''
  const tags = Array.isArray(t.tags) ? t.tags.map(String) : []
  const metadata = typeof t.metadata === 'object' && t.metadata !== null ? Object.entries(t.metadata) : []
  if (user === '' && session === '' && tags.length === 0 && metadata.length === 0) return null
  const fact = (label: string, testid: string, ...value: Child[]): HTMLElement =>
    h('div', null, h('dt', null, label), h('dd', { 'data-testid': testid }, ...value))
  return h('section', { class: 'card labels', 'data-testid': 'labels' }, h('h2', null, 'Labels'),
    h('dl', { class: 'facts' },
      user !== '' ? fact('User', 'label-user', user) : null,
      session !== '' ? fact('Session', 'label-session', h('a', { href: sessionHref(session), 'data-testid': 'session-link' }, session)) : null,
      tags.length > 0 ? fact('Tags', 'label-tags', ...tags.map((tag) => h('span', { class: 'badge', 'data-testid': 'label-tag' }, tag))) : null),
    metadata.length > 0
      ? h('table', { class: 'metadata', 'data-testid': 'label-metadata' }, h('caption', null, 'Metadata'),
        h('tbody', null, ...metadata.map(([k, v]) =>
          h('tr', { 'data-testid': 'metadata-entry' }, h('th', { scope: 'row' }, k), h('td', null, String(v))))))
      : null)
}

function detectionEl (t: TraceDetail, findings: readonly Finding[], ids: Map<Finding, string>): HTMLElement {
  const d = typeof t.detection === 'object' ? t.detection : null
  let summary: string
  if (t.confidential) summary = 'Not run: confidential requests are not inspected.'
  else if (d === null || typeof d.ran !== 'boolean') summary = 'Detection did not run for this request.'
  else if (!d.ran && d.policy === 'off') summary = 'Not run: the account\'s detection policy is off.'
  else if (!d.ran) summary = `Detection could not judge this request (${d.failure ?? 'unknown failure'}).`
  else {
    const monitored = d.blocked !== true && d.would_block === true ? ' — would have been blocked (the account monitors)' : ''
    const against = typeof d.threshold === 'number' ? ` against a threshold of ${score(d.threshold)}` : ''
    summary = `Injection score ${(d.score ?? 0).toFixed(3)}${against}${d.blocked === true ? ' — blocked' : monitored}` +
      `${d.categories !== undefined && d.categories.length > 0 ? ` · ${d.categories.join(', ')}` : ''}` +
      `${d.ms !== undefined ? ` · judged in ${ms(d.ms)}` : ''}`
  }
  const list = h('ul', { class: 'findings' })
  for (const f of findings) {
    const go = h('button', { type: 'button', class: 'link' }, 'show')
    go.addEventListener('click', () => {
      const id = ids.get(f)
      const el = id === undefined ? null : document.getElementById(id)
      el?.scrollIntoView({ block: 'center', behavior: 'smooth' })
      el?.classList.add('flash')
      setTimeout(() => el?.classList.remove('flash'), 1200)
    })
    list.appendChild(h('li', { class: `finding sev-${f.severity}`, 'data-testid': 'finding', 'data-category': f.category },
      h('span', { class: `badge cat-${f.category}` }, f.category),
      h('span', { class: 'kind' }, f.kind),
      h('span', { class: 'severity' }, f.severity),
      h('span', { class: 'detail' }, f.detail),
      h('span', { class: 'muted where' }, f.message === -1 ? 'system prompt' : `message ${f.message}`),
      ids.has(f) ? go : null))
  }
  return h('section', { class: 'card' }, h('h2', null, 'Detection'), h('p', { 'data-testid': 'detection-summary' }, summary),
    findings.length > 0 ? list : d?.ran === true ? h('p', { class: 'muted' }, 'No findings.') : null,
    whyEl(findings))
}

/** At most this many words per model finding are shown (the detector stores at most 5). */
const WHY_WORDS = 5

/** Who wrote the span a finding judged, as the why view says it. */
const SOURCES: Readonly<Record<string, string>> = { application: 'the application\'s text', user: 'the user\'s words', data: 'data the model reads' }

/**
 * Why the injection score is what it is: the rule each injection finding matched, and the words that
 * raised the model's score with their share of its logit, each with the span judged (its message, who
 * wrote it and its JSON path, where stored). Traces stored before these fields, and findings without
 * them, show nothing here. All text.
 */
function whyEl (findings: readonly Finding[]): HTMLElement | null {
  const items: HTMLElement[] = []
  for (const f of findings) {
    if (f.category !== 'prompt_injection' && f.category !== 'jailbreak') continue
    let where = f.message === -1 ? 'system prompt' : `message ${f.message}`
    if (typeof f.source === 'string') where += `, ${SOURCES[f.source] ?? f.source}`
    if (typeof f.path === 'string' && f.path !== '') where += `, ${f.path}`
    if (typeof f.rule === 'string' && f.rule !== '') {
      items.push(h('li', { 'data-testid': 'why-rule' }, `${f.kind}: rule ${f.rule} (${where})`))
    }
    const words = Array.isArray(f.features)
      ? f.features.filter((w) => typeof w?.feature === 'string' && typeof w.weight === 'number').slice(0, WHY_WORDS)
      : []
    if (words.length > 0) {
      items.push(h('li', { 'data-testid': 'why-model' }, `model words (${where}): `,
        ...words.flatMap((w, k) => [k > 0 ? ', ' : null, h('span', { class: 'mono', 'data-testid': 'why-word' }, `${w.feature} +${w.weight.toFixed(2)}`)])))
    }
  }
  if (items.length === 0) return null
  return h('div', { class: 'why', 'data-testid': 'detection-why' },
    h('p', { class: 'muted' }, 'Why: the rules that matched, and the words that raised the model\'s score (logit units).'),
    h('ul', null, ...items))
}

/** How the trace detail names each kind the store worker masks; other kinds (secrets) by their own name. */
const MASKED_KINDS: Readonly<Record<string, readonly [string, string]>> = {
  email: ['e-mail', 'e-mails'], phone: ['phone number', 'phone numbers'], payment_card: ['card number', 'card numbers'],
  iban: ['IBAN', 'IBANs'], us_ssn: ['SSN', 'SSNs'],
}

function maskedCounts (counts: Record<string, number> | undefined): string {
  const parts: string[] = []
  for (const [kind, n] of Object.entries(counts ?? {})) {
    if (typeof n !== 'number' || n <= 0) continue
    const [one, many] = MASKED_KINDS[kind] ?? [kind.replace(/_/g, ' '), kind.replace(/_/g, ' ') + 's']
    parts.push(`${n} ${n === 1 ? one : many}`)
  }
  return parts.join(', ')
}

/** The account masks PII at rest: the stored texts hold placeholders, and what was masked where. */
function piiMaskedEl (t: TraceDetail): HTMLElement | null {
  const d = typeof t.detection === 'object' ? t.detection : null
  if (t.confidential || d === null || d.pii_at_rest !== 'mask') return null
  const inPrompt = maskedCounts(d.pii_masked?.prompt)
  const inResponse = maskedCounts(d.pii_masked?.response)
  const where = [inPrompt !== '' ? `${inPrompt} in the prompt` : '', inResponse !== '' ? `${inResponse} in the response` : ''].filter((s) => s !== '')
  return h('p', { class: 'note', 'data-testid': 'pii-masked-note' },
    h('strong', null, 'Stored with PII masked. '),
    where.length === 0
      ? 'The account masks PII and secrets in stored text; none was found in this call.'
      : `Placeholders such as [EMAIL] stand for ${where.join('; ')}. The findings were made on the text as sent.`)
}

/** A blocked call's answer is tracegate's own refusal: the status and body the client received, as stored. */
function refusalEl (t: TraceDetail): HTMLElement {
  return h('section', { class: 'card', 'data-testid': 'blocked-answer' }, h('h2', null, 'Response'),
    h('p', null, 'Blocked: nothing was sent to the provider. The client received ',
      h('strong', { 'data-testid': 'blocked-status' }, String(t.status)), ' with this body:'),
    h('pre', { class: 'body', 'data-testid': 'blocked-body' }, prettyJson(t.response) ?? t.response))
}

function responseEl (t: TraceDetail): HTMLElement {
  if (t.blocked && !t.confidential && t.response !== '') return refusalEl(t)
  const a = answer(t.provider, t.response, t.response_truncated)
  let text: string
  let cls = 'response-text'
  if (t.confidential) text = 'Not stored (confidential).'
  else if (a === null) text = t.blocked ? 'Blocked: nothing was sent to the provider.' : 'No response was stored.'
  else { text = a.text === '' ? '(empty)' : a.text; cls += a.kind === 'text' ? '' : ` ${a.kind}` }
  if (t.confidential || a === null) cls += ' muted'
  return h('section', { class: 'card' }, h('h2', null, 'Response'),
    a?.note != null ? h('p', { class: 'note' }, a.note) : null,
    h('div', { class: cls, 'data-testid': 'response-text' }, text))
}

function rawEl (t: TraceDetail): HTMLElement {
  const shown = (text: string): string => (t.confidential ? 'Not stored (confidential).' : text === '' ? '(nothing stored)' : prettyJson(text) ?? text)
  const req = shown(t.prompt)
  const res = shown(t.response)
  const cut = (stored: number, whole: number, truncated: boolean): string =>
    truncated ? ` — cut: ${bytes(stored)} of ${bytes(whole)} stored` : ` — ${bytes(whole)}`
  return h('section', { class: 'card raw' },
    h('details', { open: true },
      h('summary', null, `Raw request${t.confidential ? '' : cut(size(t.prompt), t.request_bytes, t.prompt_truncated)}`),
      h('pre', { 'data-testid': 'raw-request' }, req)),
    h('details', { open: true },
      h('summary', null, `Raw response${t.confidential ? '' : cut(size(t.response), t.response_bytes, t.response_truncated)}`),
      h('pre', { 'data-testid': 'raw-response' }, res)))
}

/** The attempts over the provider's targets, when the call made more than one; the last is the answer's. */
function attemptsEl (t: TraceDetail): HTMLElement | null {
  const list = Array.isArray(t.attempts) ? t.attempts : []
  if (list.length < 2) return null
  return h('section', { class: 'card', 'data-testid': 'attempts' },
    h('h2', null, `Attempts (${list.length})`),
    h('div', { class: 'table-wrap' }, h('table', { class: 'list' },
      h('thead', null, h('tr', null, h('th', null, '#'), h('th', null, 'Target'), h('th', null, 'Key'), h('th', null, 'Status'), h('th', null, 'Time'), h('th', null, 'Why it gave way'))),
      h('tbody', null, ...list.map((a, i) => h('tr', { 'data-testid': 'attempt' },
        h('td', null, String(i + 1)),
        h('td', { class: 'mono' }, a.target),
        h('td', { class: 'mono' }, a.key_id === '' ? '—' : a.key_id),
        h('td', null, a.status === 0 ? 'no answer' : String(a.status)),
        h('td', null, ms(a.ms)),
        h('td', null, a.cause === '' ? (i === list.length - 1 ? 'answered' : '—') : a.cause)))))))
}

function render (root: HTMLElement, t: TraceDetail): void {
  const findings = (Array.isArray(t.issues) ? t.issues : [])
    .filter((f): f is Finding => typeof f === 'object' && f !== null)
    .sort((a, b) => (a.message ?? 0) - (b.message ?? 0) || (a.span?.[0] ?? 0) - (b.span?.[0] ?? 0))
  const ids = new Map<Finding, string>()
  // The conversation first: it gives the marks their ids, which the findings' "show" buttons use.
  const convo = conversationEl(t, findings, ids)
  const keyName = h('span', { class: 'mono' }, t.key_id)
  get<{ keys: ApiKey[] }>('/api/ui/keys').then(({ keys }) => {
    const k = keys.find((x) => x.id === t.key_id)
    if (k !== undefined) replace(keyName, `${k.name} (${k.prefix}…)`)
  }).catch(() => {})

  const costNote = t.cost_status === 'unknown_model' ? 'no price known for this model' : t.cost_status === 'not_called' ? 'provider not called' : null
  replace(root, h('div', { class: 'detail', 'data-testid': 'trace-detail' },
    h('div', { class: 'page-head' },
      h('a', { class: 'back', href: '/traces' }, '← Traces'),
      h('h1', null, 'Trace ', h('code', { 'data-testid': 'trace-id' }, t.trace_id)),
      h('span', { class: `badge outcome-${t.outcome === 'ok' ? 'ok' : 'bad'}`, 'data-testid': 'outcome' }, t.outcome),
      t.blocked ? h('span', { class: 'badge badge-blocked', 'data-testid': 'blocked-badge' }, 'not sent to the provider') : null),
    t.confidential
      ? h('div', { class: 'banner confidential', 'data-testid': 'confidential-mark' },
        h('strong', null, 'Confidential. '), 'The caller marked this request confidential: its prompt and response were not stored and detection did not run. Counts, timings and cost are kept.')
      : null,
    piiMaskedEl(t),
    h('dl', { class: 'facts' },
      h('div', null, h('dt', null, 'Time'), h('dd', null, fullTime(t.time))),
      h('div', null, h('dt', null, 'Provider'), h('dd', null, t.provider)),
      h('div', null, h('dt', null, 'Model'), h('dd', null, t.model === '' ? '—' : t.model)),
      h('div', null, h('dt', null, 'Endpoint'), h('dd', null, t.endpoint)),
      h('div', null, h('dt', null, 'Streaming'), h('dd', null, t.streaming ? 'yes' : 'no')),
      h('div', null, h('dt', null, 'Status'), h('dd', null, t.status === 0 ? '—' : String(t.status), t.error_code !== '' ? h('span', { class: 'muted' }, ` ${t.error_code}`) : null)),
      h('div', null, h('dt', null, 'Key'), h('dd', null, keyName)),
      t.error_cause !== undefined && t.error_cause !== ''
        ? h('div', null, h('dt', null, 'Cause'), h('dd', { 'data-testid': 'error-cause' }, t.error_cause))
        : null,
      cacheFact(t)),
    labelsEl(t),
    h('div', { class: 'cards' },
      h('section', { class: 'card' }, h('h2', null, 'Tokens and cost'), h('dl', { class: 'stats' },
        stat('Input tokens', 'tokens-input', int(t.input_tokens)),
        stat('Output tokens', 'tokens-output', int(t.output_tokens)),
        stat('Cached input tokens', 'tokens-cached', int(t.cached_input_tokens)),
        stat('Counted by', 'tokens-source', t.token_source),
        stat('Cost', 'cost', usd(t.cost_usd), costNote !== null ? h('span', { class: 'muted sub' }, costNote) : null, usdTitle(t.cost_usd)))),
      h('section', { class: 'card' }, h('h2', null, 'Latency'), h('dl', { class: 'stats' },
        stat('End to end', 'latency-total', ms(t.latency_ms)),
        stat('First byte', 'latency-ttfb', ms(t.ttfb_ms)),
        stat('First token', 'latency-ttft', ms(t.ttft_ms)),
        stat('Provider', 'latency-provider', ms(t.provider_ms)),
        stat('Proxy overhead', 'latency-overhead', ms(t.overhead_ms))))),
    attemptsEl(t),
    detectionEl(t, findings, ids),
    h('section', { class: 'card' }, h('h2', null, 'Conversation'), convo),
    responseEl(t),
    rawEl(t)))
}

export const traceDetail: Page = (root, _ctx, [id]) => {
  let gone = false
  replace(root, h('p', { class: 'muted' }, 'Loading…'))
  get<TraceDetail>(`/api/ui/traces/${encodeURIComponent(id ?? '')}`).then((t) => {
    if (!gone) render(root, t)
  }).catch((e: unknown) => {
    if (gone) return
    if (e instanceof ApiError && (e.status === 404 || e.code === 'invalid_parameter')) {
      replace(root, h('div', { class: 'empty', 'data-testid': 'not-found' },
        h('h1', null, 'Trace not found'),
        h('p', { class: 'muted' }, 'No trace of this account has this id.'),
        h('a', { href: '/traces' }, 'Back to traces')))
    } else {
      replace(root, h('p', { class: 'error' }, `Could not load the trace: ${e instanceof Error ? e.message : String(e)}`))
    }
  })
  return () => { gone = true }
}

/** What the response cache did: a hit was answered without the provider and saved what it would have cost. */
function cacheFact (t: TraceDetail): HTMLElement | null {
  if (t.cache === undefined || t.cache === '') return null
  const saved = t.cache === 'hit' && t.cost_saved_usd !== null ? h('span', { class: 'muted' }, ` saved ${usd(t.cost_saved_usd)}`) : null
  return h('div', null, h('dt', null, 'Cache'), h('dd', { 'data-testid': 'cache' }, t.cache === 'hit' ? 'hit: answered without the provider' : 'miss', saved))
}
