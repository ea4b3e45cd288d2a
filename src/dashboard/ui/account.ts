// Settings → Account: the account's id (what the CLI's --account takes), its plan and whether server-side
// provider keys may be used.
import { get } from './api.js'
import { h, replace } from './dom.js'
import type { Page } from './main.js'
import type { Account } from './types.js'

export const account: Page = (root, ctx) => {
  let gone = false
  const { user } = ctx.session
  const draw = (a: Account): void => {
    const row = (label: string, testid: string | null, value: string, note?: string): HTMLElement =>
      h('div', null, h('dt', null, label), h('dd', null, h('span', { 'data-testid': testid }, value), note !== undefined ? h('span', { class: 'muted sub' }, note) : null))
    replace(root,
      h('div', { class: 'page-head' }, h('h1', null, 'Account')),
      h('section', { class: 'card' }, h('dl', { class: 'facts vertical' },
        row('Account', 'account-name', a.name),
        row('Account id', 'account-id', a.id, 'The id the CLI\'s --account option takes.'),
        row('Plan', 'account-plan', a.plan, a.plan === 'free' ? 'The free plan cannot send calls through the proxy.' : undefined),
        row('Server-side provider keys', 'account-server-side-keys', a.server_side_keys ? 'enabled' : 'disabled',
          a.server_side_keys
            ? 'Calls without a provider key use the key configured on the server.'
            : 'Every call must carry its own provider key.'),
        row('Signed in as', null, `${user.email} (${user.role})`))))
  }
  draw(ctx.session.account)
  get<Account>('/api/ui/account').then((a) => { if (!gone) draw(a) }).catch(() => {})
  return () => { gone = true }
}
