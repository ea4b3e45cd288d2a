// /traces: the live list. Newest first; keyset pages through "Load more"; new traces arrive over the
// WebSocket and go on top. Filters live in the address (?range=&provider=…) so a filtered view is a link.
import { get, type Query } from './api.js'
import { h, options, replace } from './dom.js'
import { int, ms, usd, when, fullTime, toMs } from './format.js'
import { firstCallCard } from './first-call.js'
import { Live, type LiveState } from './live.js'
import type { Page } from './main.js'
import { PROVIDERS } from './providers/index.js'
import type { ApiKey, TraceList, TraceListItem } from './types.js'

const PAGE = 50
/** Rows kept while live traces pour in; older ones are dropped from the bottom and come back through "Load more". */
const MAX_ROWS = 1000

const RANGES: ReadonlyArray<readonly [string, string]> = [
  ['hour', 'Last hour'], ['day', 'Last 24 hours'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days'], ['all', 'All time'],
]
const RANGE_MS: Record<string, number> = { hour: 3600_000, day: 86_400_000, '7d': 7 * 86_400_000, '30d': 30 * 86_400_000 }
const PROVIDER_OPTIONS: ReadonlyArray<readonly [string, string]> = [['', 'All providers'], ...PROVIDERS.map((p) => [p, p] as const)]
const OUTCOMES: ReadonlyArray<readonly [string, string]> = [
  ['', 'All outcomes'], ['ok', 'ok'], ['blocked', 'blocked'], ['limited', 'limited'], ['rejected', 'rejected'], ['provider_error', 'provider error'],
  ['provider_stream_error', 'provider stream error'], ['client_aborted', 'client aborted'], ['proxy_error', 'proxy error'],
]

interface Filters { range: string, provider: string, model: string, outcome: string, key: string, q: string }

function readFilters (): Filters {
  const p = new URLSearchParams(location.search)
  const range = p.get('range') ?? 'day'
  return {
    range: RANGES.some(([v]) => v === range) ? range : 'day',
    provider: p.get('provider') ?? '',
    model: p.get('model') ?? '',
    outcome: p.get('outcome') ?? '',
    key: p.get('key') ?? '',
    q: p.get('q') ?? '',
  }
}

function query (f: Filters, cursor: string | null, to: number | null = null): Query {
  const span = RANGE_MS[f.range]
  return {
    from: span === undefined ? null : Date.now() - span,
    to,
    provider: f.provider,
    model: f.model.trim(),
    outcome: f.outcome,
    key: f.key,
    q: f.q.trim(),
    limit: PAGE,
    cursor,
  }
}

function outcomeCell (t: TraceListItem): HTMLTableCellElement {
  const td = h('td', { 'data-col': 'outcome' })
  if (t.blocked) td.appendChild(h('span', { class: 'badge badge-blocked', 'data-testid': 'blocked-badge' }, 'blocked'))
  if (!t.blocked || t.outcome !== 'blocked') td.appendChild(h('span', { class: `badge outcome-${t.outcome === 'ok' ? 'ok' : 'bad'}` }, t.outcome))
  if (t.confidential) td.appendChild(h('span', { class: 'badge badge-confidential', title: 'Confidential: nothing of the text was stored' }, 'confidential'))
  return td
}

/** One row. Only text nodes and attributes: cheap enough to build hundreds in a frame. */
export function traceRow (t: TraceListItem, now: number): HTMLTableRowElement {
  const href = `/traces/${encodeURIComponent(t.trace_id)}`
  const tokens = t.token_source === 'none' && t.input_tokens === 0 && t.output_tokens === 0
    ? '—'
    : `${int(t.input_tokens)} / ${int(t.output_tokens)}`
  return h('tr', { 'data-testid': 'trace-row', 'data-trace-id': t.trace_id, class: t.blocked ? 'row-blocked' : null, tabindex: 0 },
    h('td', { 'data-col': 'time', 'data-time': t.time, title: fullTime(t.time) }, h('a', { href }, when(t.time, now))),
    h('td', { 'data-col': 'provider' }, t.provider),
    h('td', { 'data-col': 'model' }, t.model === '' ? '—' : t.model),
    outcomeCell(t),
    h('td', { 'data-col': 'status', class: t.status >= 400 ? 'num status-bad' : 'num' }, t.status === 0 ? '—' : t.status),
    h('td', { 'data-col': 'tokens', class: 'num', title: `input / output tokens (${t.token_source})` }, tokens),
    h('td', { 'data-col': 'cost', class: 'num' }, usd(t.cost_usd)),
    h('td', { 'data-col': 'latency', class: 'num' }, ms(t.latency_ms)))
}

/** Rows for a batch, in one fragment so the table lays out once. */
export function traceRows (items: readonly TraceListItem[], seen?: Set<string>): DocumentFragment {
  const frag = document.createDocumentFragment()
  const now = Date.now()
  for (const t of items) {
    if (seen !== undefined) {
      if (seen.has(t.trace_id)) continue
      seen.add(t.trace_id)
    }
    frag.appendChild(traceRow(t, now))
  }
  return frag
}

export const traces: Page = (root, ctx) => {
  const f = readFilters()
  const range = h('select', { 'data-testid': 'filter-range', 'aria-label': 'Time range' }, ...options(RANGES, f.range))
  const provider = h('select', { 'data-testid': 'filter-provider', 'aria-label': 'Provider' }, ...options(PROVIDER_OPTIONS, f.provider))
  const model = h('input', { 'data-testid': 'filter-model', type: 'search', placeholder: 'Model', value: f.model, 'aria-label': 'Model' })
  const outcome = h('select', { 'data-testid': 'filter-outcome', 'aria-label': 'Outcome' }, ...options(OUTCOMES, f.outcome))
  const key = h('select', { 'data-testid': 'filter-key', 'aria-label': 'API key' }, ...options([['', 'All keys'], ...(f.key !== '' ? [[f.key, f.key] as const] : [])], f.key))
  const text = h('input', { 'data-testid': 'filter-text', type: 'search', placeholder: 'Text in prompt or response', value: f.q, 'aria-label': 'Text' })
  const status = h('span', { class: 'live-status', 'data-testid': 'live-status', 'data-state': 'connecting' }, 'connecting')
  const body = h('tbody')
  const table = h('table', { class: 'list traces', 'data-testid': 'trace-list' },
    // data-col on the heads too: a narrow screen shows only time, model, outcome and latency (app.css),
    // and a tap on a row opens the detail with everything.
    h('thead', null, h('tr', null,
      h('th', { 'data-col': 'time' }, 'Time'), h('th', { 'data-col': 'provider' }, 'Provider'), h('th', { 'data-col': 'model' }, 'Model'),
      h('th', { 'data-col': 'outcome' }, 'Outcome'), h('th', { class: 'num', 'data-col': 'status' }, 'Status'),
      h('th', { class: 'num', 'data-col': 'tokens' }, 'Tokens in / out'), h('th', { class: 'num', 'data-col': 'cost' }, 'Cost'),
      h('th', { class: 'num', 'data-col': 'latency' }, 'Latency'))),
    body)
  const more = h('button', { type: 'button', 'data-testid': 'load-more', hidden: true }, 'Load more')
  const note = h('p', { class: 'muted list-note', 'data-testid': 'trace-list-note' })
  // Holds the first-call card while the account has no trace at all.
  const welcome = h('div')
  const wrap = h('div', { class: 'table-wrap' }, table)

  replace(root,
    h('div', { class: 'page-head' }, h('h1', null, 'Traces'), status),
    h('div', { class: 'filters' }, range, provider, model, outcome, key, text),
    welcome,
    wrap,
    h('div', { class: 'list-foot' }, note, more))

  const seen = new Set<string>()
  let cursor: string | null = null
  // Set when rows were dropped from the bottom: the next page starts just after the last kept row's
  // time (rows of that same millisecond that are still shown are skipped by `seen`).
  let anchorTo: number | null = null
  let generation = 0
  let loading = false

  /** Whether the account has any trace at all (whatever the filters); null until asked. */
  let anyTraces: boolean | null = null
  let asking = false
  const askAny = (): void => {
    if (asking) return
    asking = true
    get<TraceList>('/api/ui/traces', { limit: 1 }).then((p) => p.traces.length > 0, () => true).then((any) => {
      // Unanswered, the plain note is shown: no first call is offered on a guess.
      anyTraces = anyTraces === true || any
      showNote()
    })
  }

  const showNote = (): void => {
    const empty = body.childElementCount === 0
    if (!empty) anyTraces = true
    const fresh = empty && !loading && anyTraces === false
    replace(note, empty ? (loading ? 'Loading…' : 'No traces match. New ones appear here as they are stored.') : '')
    note.hidden = !empty || fresh || (!loading && anyTraces === null)
    wrap.hidden = fresh
    if (fresh && welcome.childElementCount === 0) replace(welcome, firstCallCard(ctx.session))
    else if (!fresh) welcome.textContent = ''
    if (empty && !loading && anyTraces === null) askAny()
  }

  const load = async (reset: boolean): Promise<void> => {
    const g = reset ? ++generation : generation
    loading = true
    if (reset) { cursor = null; anchorTo = null; more.hidden = true; showNote() }
    more.disabled = true
    try {
      const to = reset ? null : anchorTo
      const page = await get<TraceList>('/api/ui/traces', query(f, reset || to !== null ? null : cursor, to))
      if (g !== generation) return
      // Marks for bench/dashboard.ts: building and laying out a page of rows, and until the next frame.
      const start = performance.now()
      if (reset) { body.textContent = ''; seen.clear() }
      body.appendChild(traceRows(page.traces, seen))
      void body.offsetHeight
      performance.measure('tracegate:list-render', { start, detail: page.traces.length })
      requestAnimationFrame(() => { performance.measure('tracegate:list-frame', { start, detail: page.traces.length }) })
      anchorTo = null
      cursor = page.next_cursor
      more.hidden = cursor === null
    } catch (e) {
      if (g !== generation) return
      replace(note, `Could not load traces: ${e instanceof Error ? e.message : String(e)}`)
      note.hidden = false
      return
    } finally {
      if (g === generation) { loading = false; more.disabled = false }
    }
    showNote()
  }

  /** New traces the socket cannot vouch for (the text filter is the server's): ask for the first page and put the unseen ones on top. */
  let mergeTimer: ReturnType<typeof setTimeout> | null = null
  const mergeNewest = (): void => {
    if (mergeTimer !== null) return
    mergeTimer = setTimeout(() => {
      mergeTimer = null
      const g = generation
      get<TraceList>('/api/ui/traces', query(f, null)).then((page) => {
        if (g !== generation) return
        prepend(page.traces)
      }).catch(() => {})
    }, 300)
  }

  const prepend = (items: readonly TraceListItem[]): void => {
    const fresh = items.filter((t) => !seen.has(t.trace_id))
    if (fresh.length === 0) return
    fresh.sort((a, b) => (toMs(b.time) ?? 0) - (toMs(a.time) ?? 0))
    const frag = traceRows(fresh.slice(0, MAX_ROWS), seen)
    for (const tr of frag.children) tr.classList.add('fresh')
    body.insertBefore(frag, body.firstChild)
    if (body.childElementCount > MAX_ROWS) trim()
    showNote()
  }

  const trim = (): void => {
    while (body.childElementCount > MAX_ROWS) {
      const tr = body.lastElementChild as HTMLTableRowElement
      seen.delete(tr.dataset.traceId ?? '')
      tr.remove()
    }
    const last = body.lastElementChild as HTMLTableRowElement | null
    const t = toMs(last?.querySelector('td[data-col=time]')?.getAttribute('data-time') ?? null)
    if (t === null) return
    anchorTo = t + 1
    cursor = null
    more.hidden = false
  }

  const matches = (t: TraceListItem): boolean =>
    (f.provider === '' || t.provider === f.provider) &&
    (f.model.trim() === '' || t.model === f.model.trim()) &&
    (f.outcome === '' || t.outcome === f.outcome) &&
    (f.key === '' || t.key_id === f.key)

  const live = new Live({
    traces (items) {
      const ok = items.filter(matches)
      if (ok.length === 0) return
      if (f.q.trim() !== '') mergeNewest()
      else prepend(ok)
    },
    state (s: LiveState) {
      status.dataset.state = s
      replace(status, s)
      // A socket that keeps failing may mean the session ended: any API call then shows sign-in.
      if (s === 'offline') get('/api/ui/account').catch(() => {})
    },
    reconnected: mergeNewest,
  })

  const changed = (): void => {
    f.range = range.value
    f.provider = provider.value
    f.model = model.value
    f.outcome = outcome.value
    f.key = key.value
    f.q = text.value
    const p = new URLSearchParams()
    if (f.range !== 'day') p.set('range', f.range)
    for (const k of ['provider', 'model', 'outcome', 'key', 'q'] as const) if (f[k].trim() !== '') p.set(k, f[k].trim())
    const s = p.toString()
    history.replaceState(null, '', s === '' ? '/traces' : `/traces?${s}`)
    void load(true)
  }
  let typing: ReturnType<typeof setTimeout> | null = null
  const typed = (): void => {
    if (typing !== null) clearTimeout(typing)
    typing = setTimeout(() => { typing = null; changed() }, 300)
  }
  for (const s of [range, provider, outcome, key]) s.addEventListener('change', changed)
  for (const i of [model, text]) {
    i.addEventListener('input', typed)
    i.addEventListener('keydown', (e) => { if (e.key === 'Enter') { if (typing !== null) clearTimeout(typing); typing = null; changed() } })
  }
  more.addEventListener('click', () => { void load(false) })

  // A click anywhere on a row opens it; the time cell is a real link for new tabs.
  const open = (e: Event): void => {
    const target = e.target as Element
    if (target.closest('a') !== null) return
    const tr = target.closest<HTMLTableRowElement>('tr[data-trace-id]')
    if (tr !== null) ctx.navigate(`/traces/${encodeURIComponent(tr.dataset.traceId ?? '')}`)
  }
  body.addEventListener('click', open)
  body.addEventListener('keydown', (e) => { if (e.key === 'Enter') open(e) })

  // Key names for the key filter.
  get<{ keys: ApiKey[] }>('/api/ui/keys').then(({ keys }) => {
    const current = key.value
    const pairs: Array<readonly [string, string]> = [['', 'All keys'], ...keys.map((k) => [k.id, `${k.name} (${k.prefix}…)`] as const)]
    if (!pairs.some(([id]) => id === current)) pairs.push([current, current])
    replace(key, ...options(pairs, current))
  }).catch(() => {})

  void load(true)

  return () => {
    generation++
    live.close()
    if (mergeTimer !== null) clearTimeout(mergeTimer)
    if (typing !== null) clearTimeout(typing)
  }
}
