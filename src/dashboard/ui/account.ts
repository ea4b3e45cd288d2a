// Settings → Account: the account's id (what the CLI's --account takes), its plan, whether server-side
// provider keys may be used, its limits with their use (changed by an admin in the limits dialog), and
// its safety detection policy (detection.ts) and what its stored traces keep of PII (pii-at-rest.ts).
import { get, post } from './api.js'
import { copyButton } from './clipboard.js'
import { detectionCard } from './detection.js'
import { h, replace } from './dom.js'
import { limitLines, limitsDialog } from './limits.js'
import { piiAtRestCard } from './pii-at-rest.js'
import type { Page } from './main.js'
import type { Account, AccountLimits } from './types.js'

export const account: Page = (root, ctx) => {
  let gone = false
  const { user } = ctx.session
  const facts = h('section', { class: 'card' })
  const lines = h('div', { 'data-testid': 'account-limit-lines' })
  const edit = h('button', { type: 'button', 'data-testid': 'edit-account-limits', hidden: true }, 'Edit limits')
  const note = h('p', { class: 'muted' })
  const limitsError = h('p', { class: 'error', hidden: true })
  const dialog = limitsDialog('edit-account-limits', true)
  const detection = detectionCard()
  const piiAtRest = piiAtRestCard()
  replace(root,
    h('div', { class: 'page-head' }, h('h1', null, 'Account')),
    facts,
    h('section', { class: 'card', 'data-testid': 'account-limits' },
      h('div', { class: 'card-head' }, h('h2', null, 'Limits (use / limit)'), edit),
      h('p', { class: 'muted' }, 'They bind all the account\'s keys together; each key\'s own limits apply as well.'),
      lines, note, limitsError),
    detection.element,
    piiAtRest.element,
    dialog.element)

  // The id and its copy button outlive redraws (the page draws from the session, then from the server's
  // answer), so a click just before the second draw keeps its "Copied".
  const id = h('span', { class: 'mono', 'data-testid': 'account-id' })
  const copyId = copyButton(() => id.textContent ?? '', id, { 'data-testid': 'copy-account-id', class: 'copy quiet' })
  const draw = (a: Account): void => {
    const row = (label: string, testid: string | null, value: string, note?: string): HTMLElement =>
      h('div', null, h('dt', null, label), h('dd', null, h('span', { 'data-testid': testid }, value), note !== undefined ? h('span', { class: 'muted sub' }, note) : null))
    id.textContent = a.id
    replace(facts, h('dl', { class: 'facts vertical' },
      row('Account', 'account-name', a.name),
      h('div', null, h('dt', null, 'Account id'), h('dd', { class: 'copyable' }, id, copyId,
        h('span', { class: 'muted sub' }, 'The id the CLI\'s --account option takes.'))),
      row('Plan', 'account-plan', a.plan, a.plan === 'free' ? 'The free plan cannot send calls through the proxy.' : undefined),
      row('Server-side provider keys', 'account-server-side-keys', a.server_side_keys ? 'enabled' : 'disabled',
        a.server_side_keys
          ? 'Calls without a provider key use the key configured on the server.'
          : 'Every call must carry its own provider key.'),
      row('Signed in as', null, `${user.email} (${user.role})`)))
  }

  let current: AccountLimits | null = null
  const drawLimits = (l: AccountLimits): void => {
    current = l
    replace(lines, limitLines(l.limits, l.use))
    edit.hidden = !l.editable
    replace(note, l.editable ? '' : 'Only an admin of the account can change them.')
    limitsError.hidden = true
  }
  const loadLimits = (): void => {
    get<AccountLimits>('/api/ui/account/limits').then((l) => { if (!gone) drawLimits(l) }).catch((e: unknown) => {
      if (gone) return
      replace(limitsError, `Could not load the limits: ${e instanceof Error ? e.message : String(e)}`)
      limitsError.hidden = false
    })
  }
  edit.addEventListener('click', () => {
    if (current === null) return
    dialog.open('Limits of the account', current.limits, current.use, async (values) => {
      const saved = await post<AccountLimits>('/api/ui/account/limits', values)
      if (!gone) drawLimits(saved)
    })
  })

  draw(ctx.session.account)
  get<Account>('/api/ui/account').then((a) => { if (!gone) draw(a) }).catch(() => {})
  loadLimits()
  return () => {
    gone = true
    dialog.close()
    detection.close()
    piiAtRest.close()
  }
}
