// Reading what the dashboard shows and comparing it with what the store holds: numbers as the page
// formats them (thousands separators, dollars, ms or s) are equal to the stored value rounded to the
// digits shown, so the tests hold whatever precision the UI picks.
import type { Test } from 'tap'
import type { Locator } from 'playwright-core'

export async function text (loc: Locator): Promise<string> {
  return (await loc.textContent()) ?? ''
}

/** The first number in a text, with how many decimals it was shown with ("$0.000120" -> 0.00012, 6). */
export function shownNumber (text: string): { value: number; decimals: number } | null {
  const m = /(-?\d[\d,]*)(?:\.(\d+))?(?:e([-+]?\d+))?/i.exec(text)
  if (m === null) return null
  const intPart = (m[1] ?? '').replace(/,/g, '')
  const frac = m[2] ?? ''
  const exp = m[3] === undefined ? 0 : Number(m[3])
  const value = Number(`${intPart}${frac === '' ? '' : '.' + frac}e${exp}`)
  return { value, decimals: Math.max(0, frac.length - exp) }
}

/** A duration as the page shows it ("12.3 ms", "1.20 s", "850 µs"), in ms with its display step. */
export function shownMs (text: string): { ms: number; step: number } | null {
  const n = shownNumber(text)
  if (n === null) return null
  const unit = /\d\s*(ms|s|µs|us|μs)\b/i.exec(text)?.[1]?.toLowerCase() ?? 'ms'
  const scale = unit === 's' ? 1000 : unit === 'ms' ? 1 : 0.001
  return { ms: n.value * scale, step: 10 ** -n.decimals * scale }
}

/** Whether a shown number is the stored one rounded to the digits it shows (plus a little float slack). */
export function roundsTo (shown: number, decimals: number, actual: number, slack = 1e-9): boolean {
  return Math.abs(shown - actual) <= 0.5 * 10 ** -decimals + slack
}

export function checkCost (t: Test, shown: string, cost: number | null, where: string): void {
  if (cost === null) {
    t.equal(shownNumber(shown), null, `${where}: no cost shown for an unpriced model (${JSON.stringify(shown)})`)
    return
  }
  t.match(shown, /\$/, `${where}: cost shown in dollars (${JSON.stringify(shown)})`)
  const n = shownNumber(shown)
  t.ok(n !== null && roundsTo(n.value, n.decimals, cost), `${where}: cost ${JSON.stringify(shown)} is the stored ${cost}`)
  if (cost > 0) t.ok(n !== null && n.value > 0, `${where}: a nonzero cost is not shown as zero (${JSON.stringify(shown)})`)
}

export function checkMs (t: Test, shown: string, ms: number | null, where: string): void {
  const n = shownMs(shown)
  if (ms === null) {
    t.equal(n, null, `${where}: nothing to show, no number (${JSON.stringify(shown)})`)
    return
  }
  // Float32 columns: allow a little on top of the display rounding.
  t.ok(n !== null && Math.abs(n.ms - ms) <= n.step / 2 + 0.01, `${where}: ${JSON.stringify(shown)} is the stored ${ms} ms`)
}

export function checkInt (t: Test, shown: string, want: number, where: string): void {
  t.equal(shownNumber(shown)?.value, want, `${where}: ${JSON.stringify(shown)} is ${want}`)
}

/** Waits for the locator; a missed deadline fails the test, then waits a while more for what follows. */
export async function appearsWithin (t: Test, loc: Locator, ms: number, since: number, what: string): Promise<void> {
  try {
    await loc.waitFor({ timeout: Math.max(1, ms - (Date.now() - since)) })
    t.pass(`${what} within ${ms} ms (${Date.now() - since} ms)`)
  } catch {
    t.fail(`${what} not within ${ms} ms`)
    await loc.waitFor({ timeout: 10_000 })
  }
}
