// The trace list's filter bar, its totals and its state. The state lives in the page's address with the
// read API's own parameter names (provider, outcome=ok,blocked, latency_min, sort…), so a filtered view
// is a link and reloading it shows the same view; the range presets stay relative (`range=7d`) and a
// custom range is two instants (`from`, `to` in epoch ms), picked in the browser's time zone.
import { withQuery, type Query } from './api.js'
import { h, options, replace } from './dom.js'
import { int, ms, percent, usdSum } from './format.js'
import { PROVIDERS } from './providers/index.js'
import { OUTCOMES as OUTCOME_VALUES, outcomeLabel } from './domain/outcome.js'
import { SORT_KEYS, type SortKey } from './domain/sort-key.js'
import type { TraceTotals } from '../../store/trace-types.js'

export const RANGES: ReadonlyArray<readonly [string, string]> = [
  ['hour', 'Last hour'], ['day', 'Last 24 hours'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days'], ['all', 'All time'], ['custom', 'Custom…'],
]
const RANGE_MS: Record<string, number> = { hour: 3600_000, day: 86_400_000, '7d': 7 * 86_400_000, '30d': 30 * 86_400_000 }
const OUTCOMES: ReadonlyArray<readonly [string, string]> = OUTCOME_VALUES.map((o) => [o, outcomeLabel(o)])
const STATUSES: ReadonlyArray<readonly [string, string]> = [['2xx', '2xx'], ['4xx', '4xx'], ['5xx', '5xx']]
export type { SortKey }

/** Text filters, by their parameter name (the same in the address and the API). */
const TEXT = ['provider', 'model', 'key', 'user', 'session', 'tag', 'metadata', 'q', 'latency_min', 'latency_max', 'cost_min', 'cost_max', 'streaming', 'confidential', 'fell_over'] as const
type TextName = (typeof TEXT)[number]

export interface ListState {
  range: string
  /** The custom range's instants (epoch ms), or null. */
  from: number | null
  to: number | null
  outcome: string[]
  status: string[]
  text: Record<TextName, string>
  sort: SortKey
  order: 'asc' | 'desc'
}

function instant (v: string | null): number | null {
  return v !== null && /^\d{1,15}$/.test(v) ? Number(v) : null
}

/** The state an address holds (unknown values fall back to the defaults; the server checks the rest). */
export function readState (search: string): ListState {
  const p = new URLSearchParams(search)
  const from = instant(p.get('from'))
  const to = instant(p.get('to'))
  const range = from !== null || to !== null ? 'custom' : p.get('range') ?? 'day'
  const text = Object.fromEntries(TEXT.map((k) => [k, p.get(k) ?? ''])) as Record<TextName, string>
  const sort = p.get('sort') as SortKey | null
  return {
    range: RANGES.some(([v]) => v === range) ? range : 'day',
    from,
    to,
    outcome: (p.get('outcome') ?? '').split(',').filter((o) => OUTCOMES.some(([v]) => v === o)),
    status: (p.get('status') ?? '').split(',').filter((o) => STATUSES.some(([v]) => v === o)),
    text,
    sort: sort !== null && SORT_KEYS.includes(sort) ? sort : 'time',
    order: p.get('order') === 'asc' ? 'asc' : 'desc',
  }
}

/** The address's query for a state: only what differs from the defaults. */
export function addressQuery (s: ListState): string {
  const p = new URLSearchParams()
  if (s.range === 'custom') {
    if (s.from !== null) p.set('from', String(s.from))
    if (s.to !== null) p.set('to', String(s.to))
  } else if (s.range !== 'day') p.set('range', s.range)
  if (s.outcome.length > 0) p.set('outcome', s.outcome.join(','))
  if (s.status.length > 0) p.set('status', s.status.join(','))
  for (const k of TEXT) if (s.text[k].trim() !== '') p.set(k, s.text[k].trim())
  if (s.sort !== 'time') p.set('sort', s.sort)
  if (s.order !== 'desc') p.set('order', s.order)
  return p.toString()
}

/** The API's query for a state: a preset range becomes its start now. */
export function apiQuery (s: ListState, now = Date.now()): Query {
  const span = RANGE_MS[s.range]
  const q: Query = {
    from: s.range === 'custom' ? s.from : span === undefined ? null : now - span,
    to: s.range === 'custom' ? s.to : null,
    outcome: s.outcome.join(','),
    status: s.status.join(','),
    sort: s.sort === 'time' ? null : s.sort,
    order: s.order === 'desc' ? null : s.order,
  }
  for (const k of TEXT) q[k] = s.text[k].trim()
  return q
}

/** The export's address for a state (the list's filters and order, every row up to the cap). */
export function exportHref (s: ListState, format: 'csv' | 'jsonl'): string {
  return withQuery('/api/ui/traces/export', { ...apiQuery(s), format, max_rows: 100_000 })
}

/** `<input type=datetime-local>`'s value for an instant, in the browser's time zone. */
function localValue (t: number | null): string {
  if (t === null) return ''
  const d = new Date(t - new Date(t).getTimezoneOffset() * 60_000)
  return d.toISOString().slice(0, 16)
}

/** An instant from a datetime-local value, read in the browser's time zone. */
function fromLocal (v: string): number | null {
  if (v === '') return null
  const t = new Date(v).getTime()
  return Number.isFinite(t) ? t : null
}

/** A drop-down of checkboxes: any of the checked values. */
function checks (testid: string, label: string, pairs: ReadonlyArray<readonly [string, string]>, chosen: string[], changed: () => void): HTMLDetailsElement {
  const summary = h('summary', null)
  const show = (): void => { replace(summary, chosen.length === 0 ? label : `${label}: ${chosen.join(', ')}`) }
  const boxes = pairs.map(([value, text]) => {
    const box = h('input', { type: 'checkbox', value, checked: chosen.includes(value), 'data-testid': `${testid}-${value}` })
    box.addEventListener('change', () => {
      const at = chosen.indexOf(value)
      if (box.checked && at < 0) chosen.push(value)
      if (!box.checked && at >= 0) chosen.splice(at, 1)
      show()
      changed()
    })
    return h('label', null, box, text)
  })
  show()
  const menu = h('details', { class: 'pick', 'data-testid': testid }, summary, h('div', { class: 'pick-menu' }, ...boxes))
  // Closes as a drop-down does: on a click elsewhere or Escape.
  menu.addEventListener('keydown', (e) => { if (e.key === 'Escape') menu.open = false })
  menu.addEventListener('toggle', () => {
    if (!menu.open) return
    const away = (e: Event): void => {
      if (menu.contains(e.target as Node)) return
      menu.open = false
      document.removeEventListener('pointerdown', away, true)
    }
    document.addEventListener('pointerdown', away, true)
  })
  return menu
}

/**
 * The bar's elements, bound to `s`: every change updates `s` and calls `changed` (typing waits 300 ms).
 * `keys` fills the key filter's names once known.
 */
export function filterBar (s: ListState, changed: () => void): { bar: HTMLElement; keys (pairs: ReadonlyArray<readonly [string, string]>): void; dispose (): void } {
  let typing: ReturnType<typeof setTimeout> | null = null
  const now = (): void => {
    if (typing !== null) clearTimeout(typing)
    typing = null
    changed()
  }
  const later = (): void => {
    if (typing !== null) clearTimeout(typing)
    typing = setTimeout(now, 300)
  }
  const range = h('select', { 'data-testid': 'filter-range', 'aria-label': 'Time range' }, ...options(RANGES, s.range))
  const from = h('input', { type: 'datetime-local', 'data-testid': 'filter-from', 'aria-label': 'From', value: localValue(s.from) })
  const to = h('input', { type: 'datetime-local', 'data-testid': 'filter-to', 'aria-label': 'To', value: localValue(s.to) })
  const custom = h('span', { class: 'custom-range', hidden: s.range !== 'custom' }, from, '–', to)
  range.addEventListener('change', () => {
    s.range = range.value
    custom.hidden = s.range !== 'custom'
    if (s.range === 'custom' && s.from === null) {
      // A custom range starts as the last 24 hours, to be narrowed.
      s.from = Date.now() - 86_400_000
      from.value = localValue(s.from)
    }
    now()
  })
  for (const [input, end] of [[from, 'from'], [to, 'to']] as const) {
    input.addEventListener('change', () => { s[end] = fromLocal(input.value); now() })
  }

  const field = (name: TextName, attrs: Record<string, string>): HTMLInputElement => {
    const input = h('input', { 'data-testid': `filter-${name === 'q' ? 'text' : name.replace('_', '-')}`, value: s.text[name], ...attrs })
    input.addEventListener('input', () => { s.text[name] = input.value; later() })
    input.addEventListener('keydown', (e) => { if (e.key === 'Enter') now() })
    return input
  }
  const select = (name: TextName, label: string, pairs: ReadonlyArray<readonly [string, string]>): HTMLSelectElement => {
    const el = h('select', { 'data-testid': `filter-${name}`, 'aria-label': label }, ...options(pairs, s.text[name]))
    el.addEventListener('change', () => { s.text[name] = el.value; now() })
    return el
  }
  const provider = select('provider', 'Provider', [['', 'All providers'], ...PROVIDERS.map((p) => [p, p] as const)])
  const key = select('key', 'API key', [['', 'All keys'], ...(s.text.key !== '' ? [[s.text.key, s.text.key] as const] : [])])
  const yesNo = (name: 'streaming' | 'confidential' | 'fell_over', any: string, yes: string, no: string): HTMLSelectElement =>
    select(name, any, [['', any], ['true', yes], ['false', no]])
  const num = (name: TextName, label: string, placeholder: string, step: string): HTMLInputElement =>
    field(name, { type: 'number', min: '0', step, placeholder, 'aria-label': label, class: 'num-input' })
  /** A labelled pair of bounds, so a filled-in bound still says what it bounds. */
  const bounds = (label: string, min: HTMLInputElement, max: HTMLInputElement): HTMLElement =>
    h('span', { class: 'range-field' }, h('span', { class: 'muted' }, label), min, '–', max)

  const more = h('details', { class: 'more-filters', 'data-testid': 'more-filters' },
    h('summary', null, 'More filters'),
    h('div', { class: 'filters' },
      checks('filter-status', 'Status', STATUSES, s.status, now),
      bounds('Latency ms', num('latency_min', 'Latency at least (ms)', 'min', '1'), num('latency_max', 'Latency at most (ms)', 'max', '1')),
      bounds('Cost $', num('cost_min', 'Cost at least (USD)', 'min', 'any'), num('cost_max', 'Cost at most (USD)', 'max', 'any')),
      yesNo('streaming', 'Streaming or not', 'Streaming', 'Not streaming'),
      yesNo('confidential', 'Confidential or not', 'Confidential', 'Not confidential'),
      yesNo('fell_over', 'Fell over or not', 'Fell over to another target', 'Answered by the first attempt'),
      field('user', { type: 'search', placeholder: 'User', 'aria-label': 'User' }),
      field('session', { type: 'search', placeholder: 'Session', 'aria-label': 'Session' }),
      field('tag', { type: 'search', placeholder: 'Tag', 'aria-label': 'Tag' }),
      field('metadata', { type: 'search', placeholder: 'Metadata key=value', 'aria-label': 'Metadata key=value' })))
  // Open when one of its filters is set, so a shared view shows what narrows it.
  more.open = s.status.length > 0 || (['latency_min', 'latency_max', 'cost_min', 'cost_max', 'streaming', 'confidential', 'fell_over', 'user', 'session', 'tag', 'metadata'] as const).some((k) => s.text[k] !== '')

  const bar = h('div', { class: 'filter-bar' },
    h('div', { class: 'filters' },
      range, custom, provider,
      field('model', { type: 'search', placeholder: 'Model', 'aria-label': 'Model' }),
      checks('filter-outcome', 'Outcome', OUTCOMES, s.outcome, now),
      key,
      field('q', { type: 'search', placeholder: 'Text in prompt or response', 'aria-label': 'Text' })),
    more)
  return {
    bar,
    keys (pairs) {
      const current = key.value
      const all: Array<readonly [string, string]> = [['', 'All keys'], ...pairs]
      if (!all.some(([id]) => id === current)) all.push([current, current])
      replace(key, ...options(all, current))
    },
    dispose () { if (typing !== null) clearTimeout(typing) },
  }
}

/** The totals above the list. */
export function totalsView (): { el: HTMLElement; show (t: TraceTotals | null): void } {
  const cell = (name: string, label: string): [HTMLElement, HTMLElement] => {
    const dd = h('dd', { 'data-testid': `total-${name}` }, '…')
    return [h('div', { class: 'total' }, h('dt', null, label), dd), dd]
  }
  const [calls, callsDd] = cell('calls', 'Calls')
  const [errors, errorsDd] = cell('errors', 'Errors')
  const [tokens, tokensDd] = cell('tokens', 'Tokens in / out')
  const [cost, costDd] = cell('cost', 'Cost')
  const [latency, latencyDd] = cell('latency', 'Latency p50 / p95 / p99')
  const el = h('dl', { class: 'totals', 'data-testid': 'trace-totals' }, calls, errors, tokens, cost, latency)
  return {
    el,
    show (t) {
      if (t === null) {
        for (const dd of [callsDd, errorsDd, tokensDd, costDd, latencyDd]) replace(dd, '—')
        costDd.removeAttribute('title')
        return
      }
      replace(callsDd, int(t.calls))
      replace(errorsDd, `${int(t.errors)} (${percent(t.error_rate)})`)
      replace(tokensDd, `${int(t.input_tokens)} / ${int(t.output_tokens)}`)
      // The priced calls' sum, marked (and titled) when some or all of the calls had no price.
      const cost = usdSum(t.cost_usd, t.calls, t.unpriced_calls)
      replace(costDd, cost.text)
      if (cost.title === null) costDd.removeAttribute('title')
      else costDd.title = cost.title
      replace(latencyDd, `${ms(t.latency_p50_ms)} / ${ms(t.latency_p95_ms)} / ${ms(t.latency_p99_ms)}`)
      el.dataset.calls = String(t.calls)
    },
  }
}
