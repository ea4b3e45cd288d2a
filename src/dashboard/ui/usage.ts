// /usage: totals, charts and breakdowns over a range, from the usage rollups (time to first token and
// users from the traces). Drill-down: a key or user of a breakdown narrows the whole page to it, with the
// filter in the address (`/usage?range=7d&key=…&user=…`) so the view can be shared.
import { get, type Query } from './api.js'
import { Charts } from './charts.js'
import { h, options, replace } from './dom.js'
import { int, ms, percent, timeOfDay, toMs, usd, usdSum } from './format.js'
import type { Page } from './main.js'
import type { UsageAnswer, UsageGroupRow } from '../../store/insight-types.js'
import type { UsageGroup, UsageMeasures } from './types.js'

/** The preset windows of the usage and sessions pages. */
export const RANGES: ReadonlyArray<readonly [string, string]> = [
  ['hour', 'Last hour'], ['day', 'Last 24 hours'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days'],
]
const USERS_BY: ReadonlyArray<readonly [string, string]> = [['requests', 'by calls'], ['cost', 'by cost']]
const REFRESH_MS = 15_000

const COLORS = { blue: '#2f6fb3', red: '#c2413b', amber: '#b7791f', green: '#2f855a', purple: '#6b46c1', slate: '#4a5568' }

const compact = new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 1 })
const count = (v: number): string => (Math.abs(v) >= 10_000 ? compact.format(v) : int(v))

/** What the page shows, as its address holds it. */
interface View { range: string, key: string, user: string, usersBy: string }

function readView (): View {
  const p = new URLSearchParams(location.search)
  const range = p.get('range') ?? 'day'
  const usersBy = p.get('users_by') ?? 'requests'
  return {
    range: RANGES.some(([v]) => v === range) ? range : 'day',
    key: p.get('key') ?? '',
    user: p.get('user') ?? '',
    usersBy: usersBy === 'cost' ? 'cost' : 'requests',
  }
}

/** The page's address for a view: defaults left out, so `/usage` is the unfiltered last day. */
export function usageHref (v: View): string {
  const p = new URLSearchParams()
  if (v.range !== 'day') p.set('range', v.range)
  if (v.key !== '') p.set('key', v.key)
  if (v.user !== '') p.set('user', v.user)
  if (v.usersBy !== 'requests') p.set('users_by', v.usersBy)
  const s = p.toString()
  return s === '' ? '/usage' : `/usage?${s}`
}

function query (v: View): Query {
  return { range: v.range, key: v.key, user: v.user, users_by: v.usersBy }
}

const errorRate = (m: UsageMeasures): number | null => (m.requests > 0 ? m.errors / m.requests : null)
const cost = (m: UsageMeasures): { text: string; title: string | null } => usdSum(m.cost_usd, m.requests, m.unpriced_calls)
/** A bucket's cost for the chart: none (shown as the UNPRICED mark) when every call of it had no price. */
const chartCost = (m: UsageMeasures): number | null => (m.requests > 0 && m.unpriced_calls >= m.requests ? null : m.cost_usd)

/** Totals as plain numbers (no separators) so they read back exactly; cost with its `$` and usdSum's mark. */
function totals (t: UsageAnswer['totals']): HTMLElement {
  const item = (label: string, testid: string, value: string, title: string): HTMLElement =>
    h('div', { class: 'total' }, h('span', { class: 'label' }, label), h('span', { class: 'value', 'data-testid': testid, title }, value))
  return h('div', { class: 'totals' },
    item('Requests', 'usage-total-requests', String(t.requests), int(t.requests)),
    item('Blocked', 'usage-total-blocked', String(t.blocked), int(t.blocked)),
    item('Errors', 'usage-total-errors', String(t.errors), int(t.errors)),
    item('Error rate', 'usage-total-error-rate', percent(errorRate(t)), ''),
    item('Input tokens', 'usage-total-input-tokens', String(t.input_tokens), int(t.input_tokens)),
    item('Output tokens', 'usage-total-output-tokens', String(t.output_tokens), int(t.output_tokens)),
    item('Cost', 'usage-total-cost', cost(t).text.replace(/,/g, ''), cost(t).title ?? `$${t.cost_usd}`),
    item('Latency p50', 'usage-total-latency-p50', ms(t.latency_p50_ms), ''),
    item('Latency p95', 'usage-total-latency-p95', ms(t.latency_p95_ms), ''),
    item('Latency p99', 'usage-total-latency-p99', ms(t.latency_p99_ms), ''),
    item('TTFT p50', 'usage-total-ttft-p50', ms(t.ttft_p50_ms), `time to first token over ${int(t.streams)} streamed calls`),
    item('TTFT p95', 'usage-total-ttft-p95', ms(t.ttft_p95_ms), `time to first token over ${int(t.streams)} streamed calls`),
    item('Users', 'usage-total-users', String(t.users), 'different user labels, calls without one counted as one'))
}

interface Drill {
  /** The link that narrows the page to this row, or null when the row cannot be a filter. */
  readonly href: (g: UsageGroup) => string | null
  readonly testid: string
}

function breakdown (testid: string, title: string, rows: readonly UsageGroup[], label: (g: UsageGroup) => string, drill: Drill | null = null, extra: HTMLElement | null = null): HTMLElement {
  const num = (v: string): HTMLTableCellElement => h('td', { class: 'num' }, v)
  const body = h('tbody')
  for (const g of rows) {
    const href = drill?.href(g) ?? null
    const name = href === null ? label(g) : h('a', { href, 'data-testid': drill!.testid, title: `Usage of ${label(g)} only` }, label(g))
    body.appendChild(h('tr', { 'data-testid': 'breakdown-row', 'data-group': g.group },
      h('td', { 'data-col': 'group' }, name),
      num(int(g.requests)), num(int(g.blocked)), num(int(g.errors)),
      num(int(g.input_tokens)), num(int(g.output_tokens)), h('td', { class: 'num', 'data-col': 'cost', title: cost(g).title }, cost(g).text),
      num(ms(g.latency_p50_ms)), num(ms(g.latency_p95_ms))))
  }
  if (rows.length === 0) body.appendChild(h('tr', { class: 'empty-row' }, h('td', { colspan: 9, class: 'muted' }, 'No usage in this range.')))
  return h('section', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', null, title), extra),
    h('div', { class: 'table-wrap' }, h('table', { class: 'list', 'data-testid': testid },
      h('thead', null, h('tr', null, h('th', null, title.replace(/^(By|Top) /, '').replace(/ by .*$/, '')),
        ...['Requests', 'Blocked', 'Errors', 'Input tokens', 'Output tokens', 'Cost', 'p50', 'p95'].map((x) => h('th', { class: 'num' }, x)))),
      body)))
}

export const usage: Page = (root, ctx) => {
  const view = readView()
  const go = (v: Partial<View>): void => { ctx.navigate(usageHref({ ...view, ...v })) }
  const range = h('select', { 'data-testid': 'usage-range', 'aria-label': 'Range' }, ...options(RANGES, view.range))
  const refresh = h('button', { type: 'button', class: 'quiet' }, 'Refresh')
  const stamp = h('span', { class: 'muted' })
  const scope = h('div', { class: 'usage-scope', 'data-testid': 'usage-scope', hidden: view.key === '' && view.user === '' })
  const totalsBox = h('div')
  const chartEl = (id: string, title: string, note?: string): [HTMLElement, HTMLElement] => {
    const el = h('div', { class: 'chart', 'data-testid': id })
    return [h('section', { class: 'card chart-card' }, h('h2', null, title), note === undefined ? null : h('p', { class: 'muted chart-note' }, note), el), el]
  }
  const [reqCard, reqEl] = chartEl('chart-requests', 'Requests and blocked')
  const [errCard, errEl] = chartEl('chart-errors', 'Errors')
  const [rateCard, rateEl] = chartEl('chart-error-rate', 'Error rate')
  const [tokCard, tokEl] = chartEl('chart-tokens', 'Tokens')
  const [costCard, costEl] = chartEl('chart-cost', 'Cost')
  const [latCard, latEl] = chartEl('chart-latency', 'Latency p50 / p95 / p99')
  const [ttftCard, ttftEl] = chartEl('chart-ttft', 'Time to first token p50 / p95 / p99',
    'Streamed calls answered 2xx: from the request to its first bytes reaching the client.')
  const tables = h('div', { class: 'breakdowns' })
  const error = h('p', { class: 'error', hidden: true })

  replace(root,
    h('div', { class: 'page-head' }, h('h1', null, 'Usage'), range, refresh, stamp),
    scope,
    error,
    totalsBox,
    h('div', { class: 'chart-grid' }, reqCard, errCard, rateCard, tokCard, costCard, latCard, ttftCard),
    tables)

  const charts = new Charts()
  let generation = 0

  const drawScope = (u: UsageAnswer): void => {
    const chips: HTMLElement[] = []
    if (view.key !== '') {
      const k = u.by_key.find((r) => r.group === view.key)
      const name = k?.name != null && k.name !== '' ? k.name : view.key
      chips.push(h('span', { class: 'chip', 'data-testid': 'usage-filter-key' }, 'Key: ', h('strong', null, name),
        h('a', { href: usageHref({ ...view, key: '' }), class: 'chip-clear', 'aria-label': 'Show every key', 'data-testid': 'usage-clear-key' }, '×')))
    }
    if (view.user !== '') {
      chips.push(h('span', { class: 'chip', 'data-testid': 'usage-filter-user' }, 'User: ', h('strong', null, view.user),
        h('a', { href: usageHref({ ...view, user: '' }), class: 'chip-clear', 'aria-label': 'Show every user', 'data-testid': 'usage-clear-user' }, '×')),
      h('a', { href: `/sessions?user=${encodeURIComponent(view.user)}`, 'data-testid': 'usage-user-sessions' }, 'Sessions of this user'))
    }
    replace(scope, h('span', { class: 'muted' }, 'Showing only'), ...chips,
      h('a', { href: usageHref({ ...view, key: '', user: '' }), 'data-testid': 'usage-clear' }, 'Show all'))
  }

  const draw = (u: UsageAnswer): void => {
    drawScope(u)
    replace(totalsBox, totals(u.totals))
    const x = u.series.map((p) => Math.floor((toMs(p.t) ?? 0) / 1000))
    const step = u.bucket === 'minute' ? 60 : u.bucket === 'hour' ? 3600 : 86_400
    const from = Math.floor((toMs(u.from) ?? (x[0] ?? 0) * 1000) / 1000)
    const to = Math.floor((toMs(u.to) ?? ((x[x.length - 1] ?? 0) + step) * 1000) / 1000)
    const span: [number, number] = [Math.min(from, x[0] ?? from), Math.max(to, (x[x.length - 1] ?? to - step) + step)]
    const col = (k: keyof UsageAnswer['series'][number]): Array<number | null> => u.series.map((p) => (p[k] ?? null) as number | null)
    const base = { x, range: span, step }
    charts.draw(reqEl, { ...base, style: 'bars', format: count, integer: true, lines: [
      { label: 'Requests', color: COLORS.blue, values: col('requests') },
      { label: 'Blocked', color: COLORS.red, values: col('blocked') },
    ] })
    charts.draw(errEl, { ...base, style: 'bars', format: count, integer: true, lines: [{ label: 'Errors', color: COLORS.amber, values: col('errors') }] })
    charts.draw(rateEl, { ...base, style: 'levels', format: (v) => percent(v), lines: [
      { label: 'Error rate', color: COLORS.amber, values: u.series.map(errorRate), fill: true },
    ] })
    charts.draw(tokEl, { ...base, style: 'bars', grouped: true, format: count, integer: true, lines: [
      { label: 'Input', color: COLORS.purple, values: col('input_tokens') },
      { label: 'Output', color: COLORS.green, values: col('output_tokens') },
    ] })
    charts.draw(costEl, { ...base, style: 'bars', format: (v) => usd(v), lines: [{ label: 'Cost', color: COLORS.slate, values: u.series.map(chartCost) }] })
    charts.draw(latEl, { ...base, style: 'levels', format: (v) => ms(v), lines: [
      { label: 'p50', color: COLORS.blue, values: col('latency_p50_ms') },
      { label: 'p95', color: COLORS.amber, values: col('latency_p95_ms') },
      { label: 'p99', color: COLORS.red, values: col('latency_p99_ms') },
    ] })
    charts.draw(ttftEl, { ...base, style: 'levels', format: (v) => ms(v), lines: [
      { label: 'p50', color: COLORS.blue, values: col('ttft_p50_ms') },
      { label: 'p95', color: COLORS.amber, values: col('ttft_p95_ms') },
      { label: 'p99', color: COLORS.red, values: col('ttft_p99_ms') },
    ] })
    const usersBy = h('select', { 'data-testid': 'users-by', 'aria-label': 'Order users' }, ...options(USERS_BY, u.users_by))
    usersBy.addEventListener('change', () => { go({ usersBy: usersBy.value }) })
    replace(tables,
      breakdown('breakdown-key', 'By key', u.by_key, (g) => (g.name != null && g.name !== '' ? g.name : g.group),
        view.key === '' ? { href: (g) => usageHref({ ...view, key: g.group }), testid: 'drill-key' } : null),
      breakdown('breakdown-user', u.users_by === 'cost' ? 'Top users by cost' : 'Top users by calls', u.by_user as UsageGroupRow[],
        (g) => (g.group === '' ? '(no user label)' : g.group),
        view.user === '' ? { href: (g) => (g.group === '' ? null : usageHref({ ...view, user: g.group })), testid: 'drill-user' } : null,
        usersBy),
      breakdown('breakdown-model', 'By model', u.by_model, (g) => (g.group === '' ? '(none)' : g.group)),
      breakdown('breakdown-provider', 'By provider', u.by_provider, (g) => g.group))
    replace(stamp, `Updated ${timeOfDay(Date.now())}`)
  }

  const load = (): void => {
    const g = ++generation
    get<UsageAnswer>('/api/ui/usage', query(view)).then((u) => {
      if (g !== generation) return
      error.hidden = true
      draw(u)
    }).catch((e: unknown) => {
      if (g !== generation) return
      replace(error, `Could not load usage: ${e instanceof Error ? e.message : String(e)}`)
      error.hidden = false
    })
  }

  range.addEventListener('change', () => { go({ range: range.value }) })
  refresh.addEventListener('click', load)
  const timer = setInterval(() => { if (document.visibilityState === 'visible') load() }, REFRESH_MS)
  load()

  return () => {
    generation++
    clearInterval(timer)
    charts.destroy()
  }
}
