// Set-up for the dashboard's browser tests: Debian's chromium driven by playwright-core (never
// a browser download), what a page must not do, sign-in, requests through the proxy as the first-start
// admin (startDashboard with bootstrap), and screenshots under test-output/screenshots for a reviewer.
import { randomUUID } from 'node:crypto'
import { existsSync, mkdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { join } from 'node:path'
import type { Test } from 'tap'
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core'
import { repoFile } from '../../src/paths.js'
import { type RawResponse, send } from './http.js'
import { buildBody, CLIENT_KEYS, type Provider, ROUTES } from './bodies.js'
import { type DashboardServer, firstStart, startDashboard } from './dashboard.js'
import type { FirstStart } from '../../src/tracegate.js'

export const CHROMIUM = '/usr/bin/chromium'
export const SCREENSHOTS = fileURLToPath(repoFile('test-output/screenshots/'))

interface Tap {
  teardown (fn: () => unknown): void
}

/** The checks every browser test file ends with: nothing a page did that it must not (see Watched). */
export function checkWatched (t: Test, w: Watched, who = ''): void {
  const p = who === '' ? '' : `${who}: `
  t.same(w.dialogs, [], `${p}no dialogs`)
  t.same(w.pageErrors, [], `${p}no uncaught errors`)
  t.same(w.cspViolations, [], `${p}no CSP violations`)
  t.same(w.missingHeaders, [], `${p}every dashboard response carried the security headers`)
  t.same(w.assetProblems, [], `${p}every asset had its content-type and cache-control: no-cache`)
}

/** Debian's chromium, headless. Missing is a failure, not a skip: CI installs it (.ci/run). */
export async function launchBrowser (t: Tap): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)`)
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  })
  t.teardown(() => browser.close())
  return browser
}

/**
 * A browser, a first-started dashboard and a page signed in as its admin, for tests that hand traces
 * over directly: `owner` is the admin's account with a key id of its own (the page shows a key it does
 * not know by its id).
 */
export async function adminPage (t: Tap): Promise<{ d: DashboardServer; admin: FirstStart; page: Page; watched: Watched; owner: { accountId: string; keyId: string } }> {
  const browser = await launchBrowser(t)
  const d = await startDashboard(t, {}, { bootstrap: true, testSeams: true })
  const admin = firstStart(d)
  const { page, watched } = await newPage(browser, d.dashboard)
  await signIn(page, admin.email, admin.password)
  return { d, admin, page, watched, owner: { accountId: admin.accountId, keyId: randomUUID() } }
}

/** What a page did that it must not: dialogs opened, uncaught errors, CSP violations it reported. */
export interface Watched {
  readonly dialogs: string[]
  readonly pageErrors: string[]
  readonly cspViolations: string[]
  /** Dashboard responses without the contract's security headers: "GET /path: header". */
  readonly missingHeaders: string[]
  /** Assets served with a wrong content-type or without `cache-control: no-cache`. */
  readonly assetProblems: string[]
}

const ASSET_TYPES: Record<string, RegExp> = {
  js: /^(text|application)\/javascript\b/, css: /^text\/css\b/, svg: /^image\/svg\+xml\b/, map: /^application\/json\b/,
}

/** The headers the contract puts on every dashboard response. */
const SECURITY_HEADERS = ['content-security-policy', 'x-content-type-options', 'referrer-policy', 'x-frame-options', 'x-request-id']

/** A page's window and, when asked, its locale and time zone (Chromium's own otherwise). */
export interface PageOptions {
  readonly viewport?: { readonly width: number; readonly height: number }
  readonly locale?: string
  readonly timezoneId?: string
}

export async function newPage (browser: Browser, base: string, o: PageOptions = {}): Promise<{ context: BrowserContext; page: Page; watched: Watched }> {
  const context = await browser.newContext({
    viewport: o.viewport ?? { width: 1280, height: 860 },
    baseURL: base,
    ...(o.locale === undefined ? {} : { locale: o.locale }),
    ...(o.timezoneId === undefined ? {} : { timezoneId: o.timezoneId }),
  })
  context.setDefaultTimeout(10_000)
  const page = await context.newPage()
  const watched: Watched = { dialogs: [], pageErrors: [], cspViolations: [], missingHeaders: [], assetProblems: [] }
  page.on('response', (r) => {
    if (!r.url().startsWith(base + '/')) return
    const path = r.url().slice(base.length)
    const h = r.headers()
    for (const name of SECURITY_HEADERS) {
      if (h[name] === undefined) watched.missingHeaders.push(`${r.request().method()} ${path} (${r.status()}): ${name}`)
    }
    if (path.startsWith('/assets/') && r.status() === 200) {
      const want = ASSET_TYPES[/\.([a-z]+)(?:\?|$)/.exec(path)?.[1] ?? '']
      if (want !== undefined && !want.test(h['content-type'] ?? '')) watched.assetProblems.push(`${path}: content-type ${h['content-type']}`)
      if (!/\bno-cache\b/.test(h['cache-control'] ?? '')) watched.assetProblems.push(`${path}: cache-control ${h['cache-control']}`)
    }
  })
  page.on('dialog', (d) => { watched.dialogs.push(`${d.type()}: ${d.message()}`); d.dismiss().catch(() => {}) })
  page.on('pageerror', (e) => { watched.pageErrors.push(String(e)) })
  page.on('console', (m) => {
    if (m.type() === 'error' && /content security policy/i.test(m.text())) watched.cspViolations.push(m.text())
  })
  return { context, page, watched }
}

/**
 * Signs in through the form and waits for the shell to show the signed-in email (on a narrow window it is
 * in the folded menu: there it is waited for in the page, not on screen).
 */
export async function signIn (page: Page, email: string, password: string): Promise<void> {
  await page.goto('/signin')
  const form = page.locator('form[data-testid=signin-form]')
  await form.waitFor()
  await form.locator('input[name=email]').fill(email)
  await form.locator('input[name=password]').fill(password)
  await page.locator('button[data-testid=signin-submit]').click()
  const narrow = (page.viewportSize()?.width ?? 1280) <= 720
  await page.locator('[data-testid=user-email]').filter({ hasText: email }).waitFor({ state: narrow ? 'attached' : 'visible' })
}

/** How wide the page's content is against its window: no horizontal page scroll when scrollWidth <= innerWidth. */
export async function pageWidth (page: Page): Promise<{ scrollWidth: number; innerWidth: number }> {
  return await page.evaluate(() => ({ scrollWidth: document.scrollingElement?.scrollWidth ?? Infinity, innerWidth: window.innerWidth }))
}

/**
 * The elements of the page's own content (under main) that stick out past the viewport outside any
 * container that scrolls sideways itself (a table's wrapper), each as `tag.class Npx`.
 */
export async function overflowing (page: Page): Promise<string[]> {
  return await page.evaluate(() => {
    const width = document.documentElement.clientWidth
    const scrolls = (el: Element | null): boolean => {
      for (let e = el; e !== null; e = e.parentElement) if (/(auto|scroll)/.test(getComputedStyle(e).overflowX)) return true
      return false
    }
    return [...document.querySelectorAll('main *')].filter((el) => el.getBoundingClientRect().right > width + 0.5 && !scrolls(el.parentElement))
      .map((el) => `${el.tagName.toLowerCase()}.${el.className} ${Math.round(el.getBoundingClientRect().right)}px`)
  })
}

export function nonce (label: string): string {
  return `${label}-${randomUUID()}`
}

export function rowOf (page: Page, traceId: string): Locator {
  return page.locator(`tr[data-testid=trace-row][data-trace-id="${traceId}"]`)
}

/** The trace list, with its WebSocket open. */
export async function openList (page: Page): Promise<void> {
  await page.goto('/traces')
  await page.locator('table[data-testid=trace-list]').waitFor()
  await page.waitForFunction(() => document.querySelector('[data-testid=live-status]')?.textContent?.trim() === 'live')
  // The first page has been put in: a live trace that arrives while it loads is wiped by it (the list
  // starts over when the page comes), and traces now arrive live within milliseconds of their call.
  await page.waitForFunction(() => document.querySelector('[data-testid=trace-list-note]')?.textContent !== 'Loading…')
}

export async function screenshot (page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true })
  // From the top, so the sticky header is where a reader expects it.
  await page.evaluate(() => { window.scrollTo(0, 0) })
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true })
}

export interface Sent {
  readonly status: number
  readonly traceId: string
  readonly body: any
  readonly raw: RawResponse
}

/** One call through the proxy with a body the caller built (service fields included). */
export async function sendBody (d: DashboardServer, provider: Provider, body: Record<string, unknown>): Promise<Sent> {
  const raw = await send(d.url + ROUTES[provider], { body: JSON.stringify(body) })
  if (raw.requestId === '') throw new Error('no x-request-id on the proxy response')
  let parsed: unknown = null
  try { parsed = JSON.parse(raw.text) } catch { parsed = null }
  return { status: raw.status, traceId: raw.requestId, body: parsed, raw }
}

/** The proxy's answer in a few words, for assertion messages: `200`, or `503 detection_unavailable`. */
export function said (r: Sent): string {
  const code = r.body?.error?.code
  return typeof code === 'string' ? `${r.status} ${code}` : String(r.status)
}

/**
 * A body for each dialect with a system prompt and one user message holding `text`, so the detail page
 * can show the conversation by role as the dialect carries it.
 */
export function chatBody (provider: Provider, apiKey: string, text: string, options: { model?: string; stream?: boolean } = {}): Record<string, unknown> {
  return buildBody(provider, { apiKey, text, system: true, providerKey: CLIENT_KEYS[provider], ...options }).value
}

/** A chat call through the proxy with the first-start admin's proxy key (streamed when asked). */
export async function callProxy (d: DashboardServer, provider: Provider, text: string, options: { model?: string; stream?: boolean } = {}): Promise<Sent> {
  return await sendBody(d, provider, chatBody(provider, firstStart(d).proxyKey, text, options))
}
