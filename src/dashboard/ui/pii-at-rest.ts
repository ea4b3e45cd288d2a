// Settings → Account, the stored text card: whether the prompt and response of the account's calls are
// stored as sent or with their PII and secrets masked. Every user sees it; an admin changes it here (the
// server refuses anyone else, and checks the value).
import { get, post } from './api.js'
import { h, options, replace } from './dom.js'

type PiiAtRest = 'keep' | 'mask'

/** GET/POST /api/ui/account/pii-at-rest (src/dashboard/detection-routes.ts). */
export interface AccountPiiAtRest {
  pii_at_rest: PiiAtRest
  editable: boolean
}

const CHOICES: ReadonlyArray<readonly [PiiAtRest, string, string]> = [
  ['keep', 'Stored as sent', 'Prompts and responses are stored as the caller and the provider sent them.'],
  ['mask', 'PII and secrets masked', 'E-mails, phone numbers, card numbers, IBANs, SSNs and API keys or other secrets are replaced by placeholders such as [EMAIL] and [SECRET] before a trace is stored; its findings are kept.'],
]

const choice = (v: PiiAtRest): readonly [PiiAtRest, string, string] => CHOICES.find(([c]) => c === v) ?? CHOICES[0]!

export interface PiiAtRestCard {
  readonly element: HTMLElement
  /** Stops drawing answers that arrive after the page is left. */
  close (): void
}

export function piiAtRestCard (): PiiAtRestCard {
  let gone = false
  const value = h('span', { 'data-testid': 'pii-at-rest-value' })
  const about = h('span', { class: 'muted sub' })
  const select = h('select', { name: 'pii_at_rest', 'data-testid': 'pii-at-rest-select', 'aria-label': 'Stored prompts and responses' },
    ...options(CHOICES.map(([v, l]) => [v, l] as const)))
  const save = h('button', { type: 'submit', class: 'primary', 'data-testid': 'pii-at-rest-save' }, 'Save')
  const form = h('form', { class: 'form-actions', hidden: true, 'data-testid': 'pii-at-rest-form' }, select, save)
  const note = h('p', { class: 'muted' })
  const error = h('p', { class: 'error', role: 'alert', hidden: true, 'data-testid': 'pii-at-rest-error' })
  const element = h('section', { class: 'card', 'data-testid': 'account-pii-at-rest' },
    h('div', { class: 'card-head' }, h('h2', null, 'Stored prompts and responses')),
    h('dl', { class: 'facts vertical' }, h('div', null, h('dt', null, 'PII at rest'), h('dd', null, value, about))),
    form, note, error)

  const draw = (p: AccountPiiAtRest): void => {
    const [v, label, text] = choice(p.pii_at_rest)
    replace(value, label)
    value.dataset.value = v
    replace(about, text)
    select.value = v
    form.hidden = !p.editable
    replace(note, p.editable ? 'The proxy applies a change from its next call; traces already stored stay as they are.' : 'Only an admin of the account can change it.')
  }
  const fail = (what: string, e: unknown): void => {
    replace(error, `${what}: ${e instanceof Error ? e.message : String(e)}`)
    error.hidden = false
  }

  get<AccountPiiAtRest>('/api/ui/account/pii-at-rest').then((p) => { if (!gone) draw(p) }).catch((e: unknown) => {
    if (!gone) fail('Could not load the setting', e)
  })
  form.addEventListener('submit', (e) => {
    e.preventDefault()
    save.disabled = true
    error.hidden = true
    post<AccountPiiAtRest>('/api/ui/account/pii-at-rest', { pii_at_rest: select.value })
      .then((p) => { if (!gone) draw(p) })
      .catch((err: unknown) => { if (!gone) fail('Could not save', err) })
      .finally(() => { save.disabled = false })
  })
  return {
    element,
    close () { gone = true },
  }
}
