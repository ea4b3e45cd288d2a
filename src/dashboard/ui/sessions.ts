// /sessions: the conversations callers labelled with `x-tracegate-session`, most recently active first;
// /sessions/{id}: one session as a conversation, its calls oldest first, each with its new message and
// the answer, under the session's totals. Everything from a trace is set as text.
import { ApiError, get } from './api.js'
import { conversation, messages } from './conversation.js'
import { h, options, replace } from './dom.js'
import { fullTime, int, ms, usd, usdSum, usdTitle, when } from './format.js'
import { parse } from './json.js'
import type { Page } from './main.js'
import { answer } from './response.js'
import { RANGES } from './usage.js'
import type { SessionBody, SessionCall, SessionList, SessionSummary } from '../../store/insight-types.js'


export function sessionHref (id: string): string {
  return `/sessions/${encodeURIComponent(id)}`
}

function listHref (range: string, user: string): string {
  const p = new URLSearchParams()
  if (range !== '7d') p.set('range', range)
  if (user !== '') p.set('user', user)
  const s = p.toString()
  return s === '' ? '/sessions' : `/sessions?${s}`
}

function failure (e: unknown): string {
  return e instanceof Error ? e.message : String(e)
}

/** A session's cost: the priced calls' sum, marked when some or all of its calls had no price. */
const cost = (s: SessionSummary): { text: string; title: string | null } => usdSum(s.cost_usd, s.calls, s.unpriced_calls)

function sessionRow (s: SessionSummary): HTMLTableRowElement {
  const num = (v: string, col: string): HTMLTableCellElement => h('td', { class: 'num', 'data-col': col }, v)
  return h('tr', { 'data-testid': 'session-row', 'data-session': s.session },
    h('td', { 'data-col': 'session', class: 'session-id' }, h('a', { href: sessionHref(s.session), 'data-testid': 'session-link' }, s.session)),
    h('td', { 'data-col': 'user' }, s.user === '' ? h('span', { class: 'muted' }, '—') : s.user, s.users > 1 ? h('span', { class: 'muted' }, ` +${s.users - 1}`) : null),
    h('td', { 'data-col': 'first', title: fullTime(s.first_time) }, when(s.first_time)),
    h('td', { 'data-col': 'last', title: fullTime(s.last_time) }, when(s.last_time)),
    num(int(s.calls), 'calls'),
    num(int(s.errors), 'errors'),
    num(int(s.input_tokens + s.output_tokens), 'tokens'),
    h('td', { class: 'num', 'data-col': 'cost', title: cost(s).title }, cost(s).text),
    num(ms(s.duration_ms), 'duration'))
}

export const sessions: Page = (root, ctx) => {
  const p = new URLSearchParams(location.search)
  const initial = p.get('range') ?? '7d'
  const rangeValue = RANGES.some(([v]) => v === initial) ? initial : '7d'
  const userValue = p.get('user') ?? ''
  const range = h('select', { 'data-testid': 'sessions-range', 'aria-label': 'Range' }, ...options(RANGES, rangeValue))
  const user = h('input', { type: 'search', 'data-testid': 'sessions-user', placeholder: 'User', 'aria-label': 'User', value: userValue })
  const form = h('form', { class: 'filters', 'data-testid': 'sessions-filters' }, range, user, h('button', { type: 'submit' }, 'Apply'))
  const body = h('tbody')
  const more = h('button', { type: 'button', class: 'quiet', 'data-testid': 'sessions-more', hidden: true }, 'Load more')
  const status = h('p', { class: 'muted' })
  replace(root,
    h('div', { class: 'page-head' }, h('h1', null, 'Sessions'), form),
    h('p', { class: 'muted' }, 'Calls sent with the same ', h('code', null, 'x-tracegate-session'), ' header, as one conversation.'),
    h('section', { class: 'card' }, h('div', { class: 'table-wrap' }, h('table', { class: 'list', 'data-testid': 'session-list' },
      h('thead', null, h('tr', null, h('th', null, 'Session'), h('th', null, 'User'), h('th', null, 'First call'), h('th', null, 'Last call'),
        ...['Calls', 'Errors', 'Tokens', 'Cost', 'Duration'].map((x) => h('th', { class: 'num' }, x)))),
      body)), more, status))

  const submit = (): void => { ctx.navigate(listHref(range.value, user.value.trim())) }
  form.addEventListener('submit', (e) => { e.preventDefault(); submit() })
  range.addEventListener('change', submit)

  let gone = false
  let cursor: string | null = null
  const load = (): void => {
    more.disabled = true
    get<SessionList>('/api/ui/sessions', { range: rangeValue, user: userValue, cursor, limit: 50 }).then((r) => {
      if (gone) return
      for (const s of r.sessions) body.appendChild(sessionRow(s))
      cursor = r.next_cursor
      more.hidden = cursor === null
      more.disabled = false
      replace(status, body.children.length === 0 ? 'No sessions in this range. Send calls with an x-tracegate-session header to see them here.' : '')
    }).catch((e: unknown) => {
      if (gone) return
      more.disabled = false
      replace(status, h('span', { class: 'error' }, `Could not load sessions: ${failure(e)}`))
    })
  }
  more.addEventListener('click', load)
  load()
  return () => { gone = true }
}

/** The call's new message (the request's last one) as the conversation view shows it. */
function inputEl (c: SessionCall): HTMLElement {
  const box = h('div', { class: 'turn-input', 'data-testid': 'turn-input' })
  if (c.confidential) {
    box.appendChild(h('p', { class: 'muted' }, 'Confidential: not stored.'))
    return box
  }
  const p = c.input === '' ? null : parse(c.input)
  const parts = p !== null && p.ok ? conversation(c.provider, p.value) : null
  if (parts === null || parts.length === 0) {
    box.appendChild(h('p', { class: 'muted' }, 'The request cannot be shown here; ', h('a', { href: `/traces/${c.trace_id}` }, 'open the trace'), '.'))
    return box
  }
  for (const m of messages(parts)) {
    box.appendChild(h('div', { class: `message role-${/^[a-z_]+$/.test(m.role) ? m.role : 'other'}`, 'data-role': m.role },
      ...m.parts.map((x) => h('div', { class: `part${x.code ? ' code' : ''}`, 'data-label': x.label }, x.display ?? x.text))))
  }
  return box
}

function outputEl (c: SessionCall): HTMLElement {
  const a = c.confidential ? null : answer(c.provider, c.output, c.output_cut)
  const text = c.confidential
    ? 'Not stored (confidential).'
    : a === null ? (c.blocked ? 'Blocked: nothing was sent to the provider.' : 'No response was stored.') : a.text === '' ? '(empty)' : a.text
  return h('div', { class: `message role-assistant turn-output${a === null || a.kind !== 'text' ? ' muted' : ''}`, 'data-role': 'assistant', 'data-testid': 'turn-output' },
    a?.note != null ? h('p', { class: 'note' }, a.note) : null,
    h('div', { class: 'part' }, text))
}

function turnEl (c: SessionCall, n: number): HTMLElement {
  return h('li', { class: 'turn', 'data-testid': 'session-call', 'data-trace-id': c.trace_id, 'data-time': c.time },
    h('div', { class: 'turn-meta' },
      h('span', { class: 'turn-n' }, `#${n}`),
      h('span', { title: fullTime(c.time) }, when(c.time)),
      h('span', null, `${c.provider} · ${c.model === '' ? '—' : c.model}`),
      h('span', { class: `badge outcome-${c.outcome === 'ok' ? 'ok' : 'bad'}`, 'data-testid': 'call-outcome' }, c.outcome),
      h('span', { class: 'muted' }, `${int(c.input_tokens)} in / ${int(c.output_tokens)} out`),
      h('span', { class: 'muted' }, ms(c.latency_ms)),
      h('span', { class: 'muted', title: usdTitle(c.cost_usd) }, usd(c.cost_usd)),
      c.user !== '' ? h('span', { class: 'muted' }, `user ${c.user}`) : null,
      h('a', { href: `/traces/${c.trace_id}`, 'data-testid': 'call-trace-link' }, 'Trace')),
    inputEl(c),
    outputEl(c))
}

function totalsEl (t: SessionSummary): HTMLElement {
  const item = (label: string, testid: string, value: string, title: string | null = null): HTMLElement =>
    h('div', { class: 'total' }, h('span', { class: 'label' }, label), h('span', { class: 'value', 'data-testid': testid, title }, value))
  return h('div', { class: 'totals', 'data-testid': 'session-totals' },
    item('Calls', 'session-total-calls', String(t.calls)),
    item('Errors', 'session-total-errors', String(t.errors)),
    item('Input tokens', 'session-total-input-tokens', String(t.input_tokens)),
    item('Output tokens', 'session-total-output-tokens', String(t.output_tokens)),
    item('Cost', 'session-total-cost', cost(t).text.replace(/,/g, ''), cost(t).title),
    item('Duration', 'session-total-duration', ms(t.duration_ms)))
}

export const sessionDetail: Page = (root, _ctx, [id]) => {
  const sid = id ?? ''
  let gone = false
  let cursor: string | null = null
  let n = 0
  const list = h('ol', { class: 'turns', 'data-testid': 'session-calls' })
  const more = h('button', { type: 'button', class: 'quiet', 'data-testid': 'session-more', hidden: true }, 'Load more')
  replace(root, h('p', { class: 'muted' }, 'Loading…'))

  const page = (first: boolean): void => {
    more.disabled = true
    get<SessionBody>(`/api/ui/sessions/${encodeURIComponent(sid)}`, { cursor }).then((s) => {
      if (gone) return
      if (first) {
        const t = s.totals
        replace(root, h('div', { class: 'detail', 'data-testid': 'session-detail' },
          h('div', { class: 'page-head' },
            h('a', { class: 'back', href: '/sessions' }, '← Sessions'),
            h('h1', { class: 'session-title' }, 'Session ', h('code', { 'data-testid': 'session-id' }, s.session))),
          h('dl', { class: 'facts' },
            h('div', null, h('dt', null, 'User'), h('dd', { 'data-testid': 'session-user' }, t.user === '' ? '—' : t.user,
              t.users > 1 ? h('span', { class: 'muted' }, ` and ${t.users - 1} more`) : null)),
            h('div', null, h('dt', null, 'First call'), h('dd', null, fullTime(t.first_time))),
            h('div', null, h('dt', null, 'Last call'), h('dd', null, fullTime(t.last_time))),
            t.blocked > 0 ? h('div', null, h('dt', null, 'Blocked'), h('dd', null, int(t.blocked))) : null),
          totalsEl(t),
          h('section', { class: 'card' }, h('h2', null, 'Conversation'), list, more)))
      }
      for (const c of s.calls) list.appendChild(turnEl(c, ++n))
      cursor = s.next_cursor
      more.hidden = cursor === null
      more.disabled = false
    }).catch((e: unknown) => {
      if (gone) return
      more.disabled = false
      if (first && e instanceof ApiError && e.status === 404) {
        replace(root, h('div', { class: 'empty', 'data-testid': 'not-found' },
          h('h1', null, 'Session not found'),
          h('p', { class: 'muted' }, 'No call of this account carries this session id.'),
          h('a', { href: '/sessions' }, 'Back to sessions')))
      } else if (first) {
        replace(root, h('p', { class: 'error' }, `Could not load the session: ${failure(e)}`))
      } else {
        more.after(h('p', { class: 'error' }, `Could not load more calls: ${failure(e)}`))
      }
    })
  }
  more.addEventListener('click', () => { page(false) })
  page(true)
  return () => { gone = true }
}
