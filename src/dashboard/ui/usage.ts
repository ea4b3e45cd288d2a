// /usage: totals, charts and breakdowns over a range, from the usage rollups.
import { get } from './api.js'
import { Charts } from './charts.js'
import { h, options, replace } from './dom.js'
import { int, ms, timeOfDay, toMs, usd } from './format.js'
import type { Page } from './main.js'
import type { Usage, UsageGroup, UsageMeasures } from './types.js'

const RANGES: ReadonlyArray<readonly [string, string]> = [
  ['hour', 'Last hour'], ['day', 'Last 24 hours'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days'],
]
const REFRESH_MS = 15_000

const COLORS = { blue: '#2f6fb3', red: '#c2413b', amber: '#b7791f', green: '#2f855a', purple: '#6b46c1', slate: '#4a5568' }

const compact = new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 1 })
const count = (v: number): string => (Math.abs(v) >= 10_000 ? compact.format(v) : int(v))

/** Totals as plain numbers (no separators) so they read back exactly; cost with its `$`. */
function totals (t: UsageMeasures): HTMLElement {
  const item = (label: string, testid: string, value: string, title: string): HTMLElement =>
    h('div', { class: 'total' }, h('span', { class: 'label' }, label), h('span', { class: 'value', 'data-testid': testid, title }, value))
  return h('div', { class: 'totals' },
    item('Requests', 'usage-total-requests', String(t.requests), int(t.requests)),
    item('Blocked', 'usage-total-blocked', String(t.blocked), int(t.blocked)),
    item('Errors', 'usage-total-errors', String(t.errors), int(t.errors)),
    item('Input tokens', 'usage-total-input-tokens', String(t.input_tokens), int(t.input_tokens)),
    item('Output tokens', 'usage-total-output-tokens', String(t.output_tokens), int(t.output_tokens)),
    item('Cost', 'usage-total-cost', usd(t.cost_usd).replace(/,/g, ''), `$${t.cost_usd}`),
    item('Latency p50', 'usage-total-latency-p50', ms(t.latency_p50_ms), ''),
    item('Latency p95', 'usage-total-latency-p95', ms(t.latency_p95_ms), ''))
}

function breakdown (testid: string, title: string, rows: readonly UsageGroup[], label: (g: UsageGroup) => string): HTMLElement {
  const num = (v: string): HTMLTableCellElement => h('td', { class: 'num' }, v)
  const body = h('tbody')
  for (const g of rows) {
    body.appendChild(h('tr', { 'data-testid': 'breakdown-row', 'data-group': g.group },
      h('td', { 'data-col': 'group' }, label(g)),
      num(int(g.requests)), num(int(g.blocked)), num(int(g.errors)),
      num(int(g.input_tokens)), num(int(g.output_tokens)), num(usd(g.cost_usd)),
      num(ms(g.latency_p50_ms)), num(ms(g.latency_p95_ms))))
  }
  if (rows.length === 0) body.appendChild(h('tr', { class: 'empty-row' }, h('td', { colspan: 9, class: 'muted' }, 'No usage in this range.')))
  return h('section', { class: 'card' }, h('h2', null, title),
    h('div', { class: 'table-wrap' }, h('table', { class: 'list', 'data-testid': testid },
      h('thead', null, h('tr', null, h('th', null, title.replace(/^By /, '')),
        ...['Requests', 'Blocked', 'Errors', 'Input tokens', 'Output tokens', 'Cost', 'p50', 'p95'].map((x) => h('th', { class: 'num' }, x)))),
      body)))
}

export const usage: Page = (root) => {
  const initial = new URLSearchParams(location.search).get('range') ?? 'day'
  const range = h('select', { 'data-testid': 'usage-range', 'aria-label': 'Range' }, ...options(RANGES, RANGES.some(([v]) => v === initial) ? initial : 'day'))
  const refresh = h('button', { type: 'button', class: 'quiet' }, 'Refresh')
  const stamp = h('span', { class: 'muted' })
  const totalsBox = h('div')
  const chartEl = (id: string, title: string): [HTMLElement, HTMLElement] => {
    const el = h('div', { class: 'chart', 'data-testid': id })
    return [h('section', { class: 'card chart-card' }, h('h2', null, title), el), el]
  }
  const [reqCard, reqEl] = chartEl('chart-requests', 'Requests and blocked')
  const [errCard, errEl] = chartEl('chart-errors', 'Errors')
  const [tokCard, tokEl] = chartEl('chart-tokens', 'Tokens')
  const [costCard, costEl] = chartEl('chart-cost', 'Cost')
  const [latCard, latEl] = chartEl('chart-latency', 'Latency p50 / p95')
  const tables = h('div', { class: 'breakdowns' })
  const error = h('p', { class: 'error', hidden: true })

  replace(root,
    h('div', { class: 'page-head' }, h('h1', null, 'Usage'), range, refresh, stamp),
    error,
    totalsBox,
    h('div', { class: 'chart-grid' }, reqCard, errCard, tokCard, costCard, latCard),
    tables)

  const charts = new Charts()
  let generation = 0

  const draw = (u: Usage): void => {
    replace(totalsBox, totals(u.totals))
    const x = u.series.map((p) => Math.floor((toMs(p.t) ?? 0) / 1000))
    const bucketS = u.bucket === 'minute' ? 60 : u.bucket === 'hour' ? 3600 : 86_400
    const from = Math.floor((toMs(u.from) ?? (x[0] ?? 0) * 1000) / 1000)
    const to = Math.floor((toMs(u.to) ?? ((x[x.length - 1] ?? 0) + bucketS) * 1000) / 1000)
    const range: [number, number] = [Math.min(from, x[0] ?? from), Math.max(to, x[x.length - 1] ?? to)]
    const col = (k: keyof UsageMeasures): Array<number | null> => u.series.map((p) => (p[k] ?? null) as number | null)
    charts.draw(reqEl, { x, range, format: count, integer: true, lines: [
      { label: 'Requests', color: COLORS.blue, values: col('requests'), fill: true },
      { label: 'Blocked', color: COLORS.red, values: col('blocked') },
    ] })
    charts.draw(errEl, { x, range, format: count, integer: true, lines: [{ label: 'Errors', color: COLORS.amber, values: col('errors'), fill: true }] })
    charts.draw(tokEl, { x, range, format: count, integer: true, lines: [
      { label: 'Input', color: COLORS.purple, values: col('input_tokens'), fill: true },
      { label: 'Output', color: COLORS.green, values: col('output_tokens'), fill: true },
    ] })
    charts.draw(costEl, { x, range, format: (v) => usd(v), lines: [{ label: 'Cost', color: COLORS.slate, values: col('cost_usd'), fill: true }] })
    charts.draw(latEl, { x, range, format: (v) => ms(v), lines: [
      { label: 'p50', color: COLORS.blue, values: col('latency_p50_ms') },
      { label: 'p95', color: COLORS.red, values: col('latency_p95_ms') },
    ] })
    replace(tables,
      breakdown('breakdown-key', 'By key', u.by_key, (g) => (g.name != null && g.name !== '' ? g.name : g.group)),
      breakdown('breakdown-model', 'By model', u.by_model, (g) => (g.group === '' ? '(none)' : g.group)),
      breakdown('breakdown-provider', 'By provider', u.by_provider, (g) => g.group))
    replace(stamp, `Updated ${timeOfDay(Date.now())}`)
  }

  const load = (): void => {
    const g = ++generation
    get<Usage>('/api/ui/usage', { range: range.value }).then((u) => {
      if (g !== generation) return
      error.hidden = true
      draw(u)
    }).catch((e: unknown) => {
      if (g !== generation) return
      replace(error, `Could not load usage: ${e instanceof Error ? e.message : String(e)}`)
      error.hidden = false
    })
  }

  range.addEventListener('change', () => {
    history.replaceState(null, '', range.value === 'day' ? '/usage' : `/usage?range=${range.value}`)
    load()
  })
  refresh.addEventListener('click', load)
  const timer = setInterval(() => { if (document.visibilityState === 'visible') load() }, REFRESH_MS)
  load()

  return () => {
    generation++
    clearInterval(timer)
    charts.destroy()
  }
}
