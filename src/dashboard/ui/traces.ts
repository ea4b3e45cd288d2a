// /traces: the live list. Newest first unless a column head sorts it; keyset pages through "Load more";
// new traces arrive over the WebSocket and go on top (in the newest-first order only). Totals of the
// filter above the list; the filters, the sort and the export are in trace-filters.ts, their state in
// the address so a filtered view is a link.
import { get, type Query } from './api.js'
import { h, replace } from './dom.js'
import { int, ms, usd, usdTitle, when, fullTime, toMs } from './format.js'
import { firstCallCard } from './first-call.js'
import { Live, type LiveState } from './live.js'
import type { Page } from './main.js'
import { addressQuery, apiQuery, exportHref, filterBar, readState, totalsView, type ListState, type SortKey } from './trace-filters.js'
import type { ApiKey, TraceList, TraceListItem } from './types.js'
import type { TraceTotals } from '../../store/trace-types.js'

const PAGE = 50
/** Rows kept while live traces pour in; older ones are dropped from the bottom and come back through "Load more". */
const MAX_ROWS = 1000

function query (s: ListState, cursor: string | null, to: number | null = null): Query {
  const q = apiQuery(s)
  return { ...q, to: to ?? q.to ?? null, limit: PAGE, cursor }
}

/** Whether the page can tell by itself that a live trace matches (otherwise the server is asked). */
function judgedHere (s: ListState): boolean {
  const t = s.text
  return s.status.length === 0 && s.range !== 'custom' &&
    (['q', 'user', 'session', 'tag', 'metadata', 'latency_min', 'latency_max', 'cost_min', 'cost_max', 'streaming', 'confidential'] as const).every((k) => t[k].trim() === '')
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
    h('td', { 'data-col': 'cost', class: 'num', title: usdTitle(t.cost_usd) }, usd(t.cost_usd)),
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
  const f = readState(location.search)
  const filters = filterBar(f, () => { changed() })
  const totals = totalsView()
  const csv = h('a', { class: 'button', 'data-testid': 'export-csv', download: '' }, 'Export CSV')
  const jsonl = h('a', { class: 'button', 'data-testid': 'export-jsonl', download: '' }, 'Export JSONL')
  const exports = h('div', { class: 'exports', title: 'The filtered list in its order, up to 100,000 rows' }, csv, jsonl)
  /** A column head that sorts the list by its column: descending first, a second click ascending. */
  function sortHead (col: SortKey, label: string, cls: string): HTMLTableCellElement {
    const button = h('button', { type: 'button', class: 'sort', 'data-testid': `sort-${col}` }, label)
    button.addEventListener('click', () => {
      f.order = f.sort === col && f.order === 'desc' ? 'asc' : 'desc'
      f.sort = col
      changed()
    })
    return h('th', { class: cls === '' ? null : cls, 'data-col': col }, button)
  }
  const showSort = (): void => {
    for (const th of table.querySelectorAll<HTMLTableCellElement>('th[data-col]')) {
      const col = th.dataset.col
      if (th.querySelector('button.sort') === null) continue
      if (col === f.sort) th.setAttribute('aria-sort', f.order === 'desc' ? 'descending' : 'ascending')
      else th.removeAttribute('aria-sort')
    }
  }
  const status = h('span', { class: 'live-status', 'data-testid': 'live-status', 'data-state': 'connecting' }, 'connecting')
  const body = h('tbody')
  const table = h('table', { class: 'list traces', 'data-testid': 'trace-list' },
    // data-col on the heads too: a narrow screen shows only time, model, outcome and latency (app.css),
    // and a tap on a row opens the detail with everything.
    h('thead', null, h('tr', null,
      sortHead('time', 'Time', ''), h('th', { 'data-col': 'provider' }, 'Provider'), h('th', { 'data-col': 'model' }, 'Model'),
      h('th', { 'data-col': 'outcome' }, 'Outcome'), h('th', { class: 'num', 'data-col': 'status' }, 'Status'),
      sortHead('tokens', 'Tokens in / out', 'num'), sortHead('cost', 'Cost', 'num'), sortHead('latency', 'Latency', 'num'))),
    body)
  const more = h('button', { type: 'button', 'data-testid': 'load-more', hidden: true }, 'Load more')
  const note = h('p', { class: 'muted list-note', 'data-testid': 'trace-list-note' })
  // Holds the first-call card while the account has no trace at all.
  const welcome = h('div')
  const wrap = h('div', { class: 'table-wrap' }, table)

  replace(root,
    h('div', { class: 'page-head' }, h('h1', null, 'Traces'), status),
    filters.bar,
    h('div', { class: 'totals-row' }, totals.el, exports),
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

  /**
   * Live traces that arrived while a first page was being read: that page may have been read before they
   * were stored, so they go back on top once it has replaced the rows. Null when no first page is read.
   */
  let arrived: TraceListItem[] | null = null

  const load = async (reset: boolean): Promise<void> => {
    const g = reset ? ++generation : generation
    loading = true
    if (reset) { cursor = null; anchorTo = null; more.hidden = true; arrived = []; showNote(); loadTotals() }
    more.disabled = true
    try {
      const to = reset ? null : anchorTo
      const page = await get<TraceList>('/api/ui/traces', query(f, reset || to !== null ? null : cursor, to))
      if (g !== generation) return
      // Marks for bench/dashboard.ts: building and laying out a page of rows, and until the next frame.
      const start = performance.now()
      if (reset) { body.textContent = ''; seen.clear() }
      body.appendChild(traceRows(page.traces, seen))
      const early = reset ? arrived : null
      if (reset) arrived = null
      if (early !== null && early.length > 0) prepend(early)
      void body.offsetHeight
      performance.measure('tracegate:list-render', { start, detail: page.traces.length })
      requestAnimationFrame(() => { performance.measure('tracegate:list-frame', { start, detail: page.traces.length }) })
      anchorTo = null
      cursor = page.next_cursor
      more.hidden = cursor === null
    } catch (e) {
      if (g !== generation) return
      arrived = null
      replace(note, `Could not load traces: ${e instanceof Error ? e.message : String(e)}`)
      note.hidden = false
      return
    } finally {
      if (g === generation) { loading = false; more.disabled = false }
    }
    showNote()
  }

  /** The totals of the filter; a newer ask wins over an older answer. */
  let totalsAsked = 0
  const loadTotals = (): void => {
    const n = ++totalsAsked
    get<TraceTotals>('/api/ui/traces/totals', apiQuery(f)).then((t) => { if (n === totalsAsked) totals.show(t) },
      () => { if (n === totalsAsked) totals.show(null) })
  }
  /** Live traces move the totals: asked again at most once a second. */
  let totalsTimer: ReturnType<typeof setTimeout> | null = null
  const refreshTotals = (): void => {
    if (totalsTimer !== null) return
    totalsTimer = setTimeout(() => { totalsTimer = null; loadTotals() }, 1000)
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
    arrived?.push(...items)
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
    (f.text.provider === '' || t.provider === f.text.provider) &&
    (f.text.model.trim() === '' || t.model === f.text.model.trim()) &&
    (f.outcome.length === 0 || f.outcome.includes(t.outcome)) &&
    (f.text.key === '' || t.key_id === f.text.key)

  const live = new Live({
    traces (items) {
      const ok = items.filter(matches)
      if (ok.length === 0) return
      refreshTotals()
      // Sorted otherwise than newest first, a new trace's place is not the top: the list stays as it is.
      if (f.sort !== 'time' || f.order !== 'desc') return
      if (!judgedHere(f)) mergeNewest()
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

  function changed (): void {
    const q = addressQuery(f)
    history.replaceState(null, '', q === '' ? '/traces' : `/traces?${q}`)
    csv.href = exportHref(f, 'csv')
    jsonl.href = exportHref(f, 'jsonl')
    showSort()
    void load(true)
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
    filters.keys(keys.map((k) => [k.id, `${k.name} (${k.prefix}…)`] as const))
  }).catch(() => {})

  csv.href = exportHref(f, 'csv')
  jsonl.href = exportHref(f, 'jsonl')
  showSort()
  void load(true)

  return () => {
    generation++
    live.close()
    totalsAsked++
    if (mergeTimer !== null) clearTimeout(mergeTimer)
    if (totalsTimer !== null) clearTimeout(totalsTimer)
    filters.dispose()
  }
}
