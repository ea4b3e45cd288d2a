// Number and time formatting. The Intl formatters are made once: making one per table cell is what
// makes long lists slow.

const integer = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 })
const decimal = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 })
const clock = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false })
const dated = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false })
const calendar = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric' })
const full = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false })

/** `12,345` */
export function int (n: number | null | undefined): string {
  return n === null || n === undefined || !Number.isFinite(n) ? '—' : integer.format(n)
}

/** Dollars with enough decimals that a tiny cost does not show as $0.00: `$1.23`, `$0.0042`, `$0.00000315`. */
export function usd (n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—'
  if (n === 0) return '$0'
  const abs = Math.abs(n)
  if (abs >= 1) return `$${n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`
  if (abs >= 0.01) return `$${n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 4 })}`
  // Three significant digits below a cent.
  const digits = Math.min(12, Math.max(4, 2 - Math.floor(Math.log10(abs)) + 1))
  return `$${n.toFixed(digits).replace(/0+$/, '')}`
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

/** Time of day for today's entries, with the date for any other day. */
export function when (t: string | number | null | undefined, now = Date.now()): string {
  const v = toMs(t)
  if (v === null) return '—'
  return Math.abs(now - v) < 86_400_000 && new Date(v).toDateString() === new Date(now).toDateString() ? clock.format(v) : dated.format(v)
}

/** A calendar date: `Nov 23, 2026`. */
export function day (t: string | number | null | undefined): string {
  const v = toMs(t)
  return v === null ? '—' : calendar.format(v)
}

export function fullTime (t: string | number | null | undefined): string {
  const v = toMs(t)
  return v === null ? '—' : full.format(v)
}

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
