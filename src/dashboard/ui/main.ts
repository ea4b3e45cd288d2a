// The dashboard's entry: finds the session, draws the shell and routes on the history API. Every page
// path gets the same HTML shell from the server, so deep links land here and are routed client side.
import { account } from './account.js'
import { ApiError, get, post, setCsrf, whenUnauthenticated } from './api.js'
import { h, replace } from './dom.js'
import { keys } from './keys.js'
import { sessionDetail, sessions } from './sessions.js'
import { signin } from './signin.js'
import { traceDetail } from './trace-detail.js'
import { traces } from './traces.js'
import type { Session } from './types.js'
import { usage } from './usage.js'

export interface Ctx {
  readonly session: Session
  navigate (path: string, opts?: { replace?: boolean }): void
}

/** A page draws into `root` and returns what to undo when it is left (sockets, timers, charts). */
export type Page = (root: HTMLElement, ctx: Ctx, params: string[]) => (() => void) | undefined

interface Route { readonly pattern: RegExp, readonly page: Page, readonly nav: string | null, readonly title: string }

const routes: Route[] = [
  { pattern: /^\/traces\/?$/, page: traces, nav: 'nav-traces', title: 'Traces' },
  { pattern: /^\/traces\/([^/]+)$/, page: traceDetail, nav: 'nav-traces', title: 'Trace' },
  { pattern: /^\/usage\/?$/, page: usage, nav: 'nav-usage', title: 'Usage' },
  { pattern: /^\/sessions\/?$/, page: sessions, nav: 'nav-sessions', title: 'Sessions' },
  { pattern: /^\/sessions\/([^/]+)$/, page: sessionDetail, nav: 'nav-sessions', title: 'Session' },
  { pattern: /^\/settings\/keys\/?$/, page: keys, nav: 'nav-keys', title: 'API Keys' },
  { pattern: /^\/settings\/account\/?$/, page: account, nav: 'nav-account', title: 'Account' },
]

const app = document.getElementById('app') ?? document.body
let session: Session | null = null
let leave: (() => void) | undefined

/** The stored traces' lag, in seconds, from which every page says so above its content. */
const BEHIND_SHOWN_S = 5
const BEHIND_POLL_MS = 5000
const behind = h('div', { class: 'banner behind', 'data-testid': 'traces-behind', role: 'status', hidden: true })
let behindTimer: ReturnType<typeof setTimeout> | null = null

/** Asks how far the stored traces are behind while signed in, every BEHIND_POLL_MS while the page is seen. */
function watchBehind (): void {
  if (behindTimer !== null) return
  const tick = (): void => {
    behindTimer = null
    if (session === null) { behind.hidden = true; return }
    const next = (): void => { if (session !== null) behindTimer = setTimeout(tick, BEHIND_POLL_MS) }
    if (document.visibilityState === 'hidden') { next(); return }
    get<{ traces_behind_s: number | null }>('/api/ui/status').then((s) => {
      const lag = s.traces_behind_s
      behind.hidden = lag === null || lag < BEHIND_SHOWN_S
      if (!behind.hidden) behind.textContent = `Traces are ${behindText(lag as number)} behind: calls made since then appear here once they are stored.`
    }, () => { /* the next tick asks again */ }).finally(next)
  }
  tick()
}

function behindText (s: number): string {
  if (s < 120) return `${Math.round(s)} s`
  if (s < 7200) return `${Math.round(s / 60)} min`
  return `${Math.round(s / 3600)} h`
}

function navigate (path: string, opts: { replace?: boolean } = {}): void {
  if (path !== location.pathname + location.search) {
    if (opts.replace === true) history.replaceState(null, '', path)
    else history.pushState(null, '', path)
  }
  render()
}

const ctx = (s: Session): Ctx => ({ session: s, navigate })

function shell (s: Session, active: string | null): HTMLElement {
  const link = (id: string, href: string, label: string): HTMLAnchorElement =>
    h('a', { 'data-testid': id, href, 'aria-current': id === active ? 'page' : null }, label)
  const signout = h('button', { type: 'button', class: 'quiet', 'data-testid': 'signout' }, 'Sign out')
  signout.addEventListener('click', () => {
    signout.disabled = true
    post('/api/ui/signout').catch(() => {}).finally(() => {
      session = null
      setCsrf('')
      navigate('/signin')
    })
  })
  // On a narrow screen the links and the user fold into a menu behind one button (CSS shows it there);
  // the shell is drawn anew on every navigation, so the menu starts closed on each page.
  const toggle = h('button', { type: 'button', class: 'menu-toggle quiet', 'data-testid': 'nav-menu', 'aria-expanded': 'false', 'aria-controls': 'top-menu' }, 'Menu')
  const header = h('header', { class: 'top' },
    h('a', { class: 'brand', href: '/traces' }, 'tracegate'),
    toggle,
    h('div', { class: 'top-menu', id: 'top-menu' },
      h('nav', { class: 'main-nav' },
        link('nav-traces', '/traces', 'Traces'),
        link('nav-usage', '/usage', 'Usage'),
        link('nav-sessions', '/sessions', 'Sessions'),
        h('span', { class: 'nav-group' }, 'Settings'),
        link('nav-keys', '/settings/keys', 'API Keys'),
        link('nav-account', '/settings/account', 'Account')),
      h('div', { class: 'who' },
        h('span', { class: 'account-name' }, s.account.name),
        h('span', { class: 'user-email', 'data-testid': 'user-email' }, s.user.email),
        signout)))
  const setOpen = (open: boolean): void => {
    header.classList.toggle('menu-open', open)
    toggle.setAttribute('aria-expanded', String(open))
  }
  toggle.addEventListener('click', () => { setOpen(!header.classList.contains('menu-open')) })
  header.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && header.classList.contains('menu-open')) { setOpen(false); toggle.focus() }
  })
  return header
}

function render (): void {
  leave?.()
  leave = undefined
  const path = location.pathname
  if (session === null) {
    document.title = 'Sign in · tracegate'
    const root = h('main', { class: 'signin-page' })
    replace(app, root)
    signin(root, (s) => {
      session = s
      setCsrf(s.csrf)
      navigate(path === '/signin' || path === '/' ? '/traces' : location.pathname + location.search, { replace: true })
    })
    return
  }
  if (path === '/' || path === '/signin') { navigate('/traces', { replace: true }); return }
  const route = routes.find((r) => r.pattern.test(path))
  const root = h('main', { class: 'page' })
  replace(app, shell(session, route?.nav ?? null), behind, root)
  watchBehind()
  if (route === undefined) {
    document.title = 'Not found · tracegate'
    replace(root, h('div', { class: 'empty', 'data-testid': 'page-not-found' }, h('h1', null, 'Page not found'), h('a', { href: '/traces' }, 'Back to traces')))
    return
  }
  document.title = `${route.title} · tracegate`
  const params = (route.pattern.exec(path) ?? []).slice(1).map((p) => decodeURIComponent(p ?? ''))
  leave = route.page(root, ctx(session), params)
}

// Same-origin links route in place; modified clicks (new tab) and downloads are left to the browser.
document.addEventListener('click', (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return
  const a = (e.target as Element | null)?.closest?.('a')
  if (a == null || a.target !== '' || a.hasAttribute('download') || a.origin !== location.origin) return
  if (!a.pathname.startsWith('/') || a.pathname.startsWith('/api/') || a.pathname.startsWith('/assets/')) return
  e.preventDefault()
  navigate(a.pathname + a.search)
})

window.addEventListener('popstate', render)

whenUnauthenticated(() => {
  if (session === null) return
  session = null
  render()
})

async function boot (): Promise<void> {
  try {
    session = await get<Session>('/api/ui/session')
    setCsrf(session.csrf)
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) {
      replace(app, h('main', { class: 'signin-page' }, h('p', { class: 'error' }, `The dashboard could not reach its server: ${e instanceof Error ? e.message : String(e)}`)))
      return
    }
    session = null
  }
  render()
}

void boot()
