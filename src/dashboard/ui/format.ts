// Number and time formatting. The Intl formatters are made once: making one per table cell is what
// makes long lists slow.
//
// Every time the dashboard shows goes through this module: the browser's locale and time zone
// (Intl.DateTimeFormat with `undefined` for both), so one call reads the same in the list, the detail,
// the charts and the keys. Numbers stay in one fixed form (en-US) so a figure reads the same everywhere.

const integer = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 })
const decimal = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 })

const HMS = { hour: '2-digit', minute: '2-digit', second: '2-digit' } as const
const HM = { hour: '2-digit', minute: '2-digit' } as const
const clock = new Intl.DateTimeFormat(undefined, HMS)
const clockShort = new Intl.DateTimeFormat(undefined, HM)
const dated = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', ...HMS })
const datedYear = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric', ...HMS })
const calendar = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric' })
const monthDay = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' })
const minutes = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric', ...HM })
const full = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric', ...HMS, timeZoneName: 'short' })
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' })

/** `12,345` */
export function int (n: number | null | undefined): string {
  return n === null || n === undefined || !Number.isFinite(n) ? '—' : integer.format(n)
}

const cents = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })
const twoSignificant = new Intl.NumberFormat('en-US', { minimumSignificantDigits: 2, maximumSignificantDigits: 2 })

/** What a cost shows when its model has no price: never `$0`, which would read as free. */
export const UNPRICED = Object.freeze({ text: '—', title: 'not priced' })

/**
 * The one cost format. A dollar or more: cents (`$1,234.50`). Under a dollar: two significant digits,
 * at least cents (`$0.50`, `$0.042`, `$0.00036`, `$0.0000031`), so a tiny cost never reads as $0.00 and
 * every amount carries the same precision. Zero is `$0.00`; no price (null) is the UNPRICED mark.
 */
export function usd (n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return UNPRICED.text
  if (n === 0) return '$0.00'
  const sign = n < 0 ? '-' : ''
  const abs = Math.abs(n)
  // Rounding can carry a digit past a dollar ($0.996 → $1.0): such an amount takes the dollar form.
  const small = abs < 1 ? twoSignificant.format(abs) : ''
  return `${sign}$${abs >= 1 || Number(small) >= 1 ? cents.format(abs) : small}`
}

/** The title that goes with usd(n): "not priced" beside the UNPRICED mark, none for an amount. */
export function usdTitle (n: number | null | undefined): string | null {
  return n === null || n === undefined || !Number.isFinite(n) ? UNPRICED.title : null
}

/**
 * A cost summed over `calls` calls of which `unpriced` had no price (`cost` is the priced ones' sum): the
 * UNPRICED mark when none was priced, the sum with ` + —` when some were not (titled how many), else the
 * sum alone. So a sum never reads as the whole cost when calls are missing from it.
 */
export function usdSum (cost: number, calls: number, unpriced: number): { text: string; title: string | null } {
  if (unpriced <= 0) return { text: usd(cost), title: null }
  if (unpriced >= calls) return { ...UNPRICED }
  return { text: `${usd(cost)} + ${UNPRICED.text}`, title: `${int(unpriced)} of ${int(calls)} calls not priced` }
}

/** A score or threshold from 0 to 1, to three decimals without trailing zeros: `0.735`, `0.5`, `1`. */
export function score (n: number): string {
  return String(Math.round(n * 1000) / 1000)
}

/** `0.42 ms`, `12.3 ms`, `1,204 ms`, `12.4 s` */
export function ms (n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—'
  if (n >= 10_000) return `${decimal.format(n / 1000)} s`
  if (n >= 100) return `${integer.format(n)} ms`
  if (n >= 1) return `${decimal.format(n)} ms`
  return n === 0 ? '0 ms' : `${n.toFixed(2)} ms`
}

export function bytes (n: number): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${decimal.format(n / 1024)} KiB`
  return `${decimal.format(n / 1024 / 1024)} MiB`
}

/**
 * Epoch ms from what the API sends: a number, ISO text, or ClickHouse's `YYYY-MM-DD hh:mm:ss.fff`
 * (UTC, no zone), which Date would read as local time.
 */
export function toMs (t: string | number | null | undefined): number | null {
  if (t === null || t === undefined || t === '') return null
  if (typeof t === 'number') return t
  if (/^\d+$/.test(t)) return Number(t)
  const s = /^\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d+)?)?$/.test(t) ? `${t.replace(' ', 'T')}Z` : t
  const v = Date.parse(s)
  return Number.isNaN(v) ? null : v
}

const DAY_MS = 86_400_000

function sameDay (a: number, b: number): boolean {
  return Math.abs(a - b) < DAY_MS && new Date(a).toDateString() === new Date(b).toDateString()
}

/** The list's time: the time of day for today's entries, with the date for any other day (and the year for another year). */
export function when (t: string | number | null | undefined, now = Date.now()): string {
  const v = toMs(t)
  if (v === null) return '—'
  if (sameDay(v, now)) return clock.format(v)
  return new Date(v).getFullYear() === new Date(now).getFullYear() ? dated.format(v) : datedYear.format(v)
}

type Time = string | number | null | undefined

/** A formatter of what the API sends as a time, `—` for none. */
function timeIn (f: Intl.DateTimeFormat): (t: Time) => string {
  return (t) => {
    const v = toMs(t)
    return v === null ? '—' : f.format(v)
  }
}

/** The time of day with seconds: `14:05:09`, `02:05:09 PM`. */
export const timeOfDay = timeIn(clock)

/** A calendar date: `Nov 23, 2026`. */
export const day = timeIn(calendar)

/** Date and time to the minute, always with the date: `Nov 23, 2026, 14:05` (a key's last use). */
export const dateTime = timeIn(minutes)

/** Date, time to the second and the time zone: `Nov 23, 2026, 14:05:09 GMT+1` (a trace's detail, tooltips). */
export const fullTime = timeIn(full)

export function isoTime (t: string | number | null | undefined): string {
  const v = toMs(t)
  return v === null ? '' : new Date(v).toISOString()
}

/** A share as a percentage: `0%`, `0.42%`, `12.5%`, `100%`. */
export function percent (n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—'
  const p = n * 100
  if (p === 0 || p >= 100) return `${Math.round(p)}%`
  return p < 1 ? `${p.toFixed(2)}%` : `${decimal.format(p)}%`
}

/** How long ago, as a secondary hint beside a date: `5 minutes ago`, `yesterday`. */
export function ago (t: string | number | null | undefined, now = Date.now()): string {
  const v = toMs(t)
  if (v === null) return ''
  const s = Math.round((v - now) / 1000)
  const abs = Math.abs(s)
  if (abs < 45) return relative.format(0, 'second')
  if (abs < 2700) return relative.format(Math.round(s / 60), 'minute')
  if (abs < 79_200) return relative.format(Math.round(s / 3600), 'hour')
  if (abs < 26 * DAY_MS / 1000) return relative.format(Math.round(s / 86_400), 'day')
  if (abs < 320 * DAY_MS / 1000) return relative.format(Math.round(s / (30 * 86_400)), 'month')
  return relative.format(Math.round(s / (365 * 86_400)), 'year')
}

/**
 * A chart's x-axis label for a tick `stepMs` apart from the next: the time of day for steps under a day
 * (the date at midnight, so a day boundary reads), the date for longer steps.
 */
export function axisTime (epochMs: number, stepMs: number): string {
  if (stepMs >= DAY_MS) return monthDay.format(epochMs)
  const d = new Date(epochMs)
  if (d.getHours() === 0 && d.getMinutes() === 0 && d.getSeconds() === 0) return monthDay.format(epochMs)
  return stepMs < 60_000 ? clock.format(epochMs) : clockShort.format(epochMs)
}

/** A chart point's time in its tooltip (legend): the date for day buckets, else date and time to the minute. */
export function bucketTime (epochMs: number, bucketMs: number): string {
  return bucketMs >= DAY_MS ? calendar.format(epochMs) : minutes.format(epochMs)
}
