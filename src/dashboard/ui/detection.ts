// Settings → Account, the safety detection card: the account's policy (block, monitor, off), the score at
// which it blocks, the score at which data spans block, and its allow phrases; an admin changes them in a dialog, with the server's
// invalid_parameter shown beside the field it names. The server checks every value (the CLI's rules).
import { ApiError, get, post } from './api.js'
import { h, options, replace } from './dom.js'
import { score } from './format.js'

type Policy = 'block' | 'monitor' | 'off'

/** GET/POST /api/ui/account/detection (src/dashboard/detection-routes.ts). */
export interface AccountDetection {
  detection: { policy: Policy, threshold: number | null, data_threshold: number | null, allow_phrases: string[] }
  editable: boolean
}

type Field = 'policy' | 'threshold' | 'data_threshold' | 'allow_phrases'

const POLICIES: ReadonlyArray<readonly [Policy, string, string]> = [
  ['block', 'Block', 'An injection is refused with 403 and never reaches the provider.'],
  ['monitor', 'Monitor', 'Every call is judged and its verdict recorded on the trace, and it is forwarded anyway.'],
  ['off', 'Off', 'Calls of this account are not inspected for injection, PII or secrets.'],
]

const describe = (p: Policy): string => POLICIES.find(([v]) => v === p)?.[2] ?? ''
const label = (p: Policy): string => POLICIES.find(([v]) => v === p)?.[1] ?? p

export interface DetectionCard {
  readonly element: HTMLElement
  /** Closes the dialog and stops drawing answers that arrive after the page is left. */
  close (): void
}

export function detectionCard (): DetectionCard {
  let gone = false
  let current: AccountDetection | null = null
  const facts = h('dl', { class: 'facts vertical', 'data-testid': 'detection-facts' })
  const edit = h('button', { type: 'button', 'data-testid': 'edit-detection', hidden: true }, 'Edit detection')
  const note = h('p', { class: 'muted' })
  const loadError = h('p', { class: 'error', hidden: true })
  const dialog = detectionDialog()
  const element = h('section', { class: 'card', 'data-testid': 'account-detection' },
    h('div', { class: 'card-head' }, h('h2', null, 'Safety detection'), edit),
    facts, note, loadError, dialog.element)

  const draw = (d: AccountDetection): void => {
    current = d
    const { policy, threshold, data_threshold: dataThreshold, allow_phrases: phrases } = d.detection
    const row = (title: string, testid: string, value: HTMLElement | string, sub?: string): HTMLElement =>
      h('div', null, h('dt', null, title), h('dd', null, h('span', { 'data-testid': testid }, value), sub !== undefined ? h('span', { class: 'muted sub' }, sub) : null))
    replace(facts,
      row('Policy', 'detection-policy', label(policy), describe(policy)),
      row('Threshold', 'detection-threshold', threshold === null ? 'the detector\'s own threshold' : score(threshold),
        'A score at or above it counts as injection; from 0 to 1, lower catches more prompts, higher fewer.'),
      row('Data threshold', 'detection-data-threshold', dataThreshold === null ? 'the threshold' : score(dataThreshold),
        'The same for text the model is handed to read: tool results, documents, search results, pasted text.'),
      row('Allow phrases', 'detection-allow',
        phrases.length === 0
          ? h('span', { class: 'muted' }, '—')
          : h('ul', { class: 'limit-lines' }, ...phrases.map((p) => h('li', { 'data-testid': 'allow-phrase' }, p))),
        'Never count as injection in this account\'s calls (whole phrase, any case).'))
    edit.hidden = !d.editable
    replace(note, d.editable ? '' : 'Only an admin of the account can change them.')
    loadError.hidden = true
  }

  get<AccountDetection>('/api/ui/account/detection').then((d) => { if (!gone) draw(d) }).catch((e: unknown) => {
    if (gone) return
    replace(loadError, `Could not load the detection policy: ${e instanceof Error ? e.message : String(e)}`)
    loadError.hidden = false
  })
  edit.addEventListener('click', () => {
    if (current === null) return
    dialog.open(current.detection, async (values) => {
      const saved = await post<AccountDetection>('/api/ui/account/detection', values)
      if (!gone) draw(saved)
    })
  })
  return {
    element,
    close () {
      gone = true
      dialog.close()
    },
  }
}

interface DetectionDialog {
  readonly element: HTMLDialogElement
  open (d: AccountDetection['detection'], save: (values: Record<string, unknown>) => Promise<void>): void
  close (): void
}

/** A real <dialog>: the policy, the threshold (empty: the detector's own), the data threshold (empty: the threshold), one allow phrase per line. */
function detectionDialog (): DetectionDialog {
  const policy = h('select', { name: 'policy', 'aria-describedby': 'detection-policy-hint' }, ...options(POLICIES.map(([v, l]) => [v, l] as const)))
  const policyHint = h('span', { class: 'muted hint', id: 'detection-policy-hint' })
  const threshold = h('input', { name: 'threshold', inputmode: 'decimal', placeholder: 'the detector\'s own', autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'detection-error-threshold' })
  const dataThreshold = h('input', { name: 'data_threshold', inputmode: 'decimal', placeholder: 'the threshold', autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'detection-error-data_threshold' })
  const phrases = h('textarea', { name: 'allow_phrases', rows: 4, placeholder: 'none, e.g. developer mode', spellcheck: 'false', 'aria-describedby': 'detection-error-allow_phrases' })
  const errors = new Map<Field, HTMLElement>()
  const inputs = new Map<Field, HTMLElement>([['policy', policy], ['threshold', threshold], ['data_threshold', dataThreshold], ['allow_phrases', phrases]])
  const errorEl = (f: Field): HTMLElement => {
    const el = h('span', { class: 'error field-error', id: `detection-error-${f}`, 'data-testid': `detection-error-${f}`, role: 'alert', hidden: true })
    errors.set(f, el)
    return el
  }
  const field = (text: string, input: HTMLElement, f: Field, ...more: HTMLElement[]): HTMLElement =>
    h('div', { class: 'field wide' }, h('label', null, h('span', null, text), input), ...more, errorEl(f))
  const heading = h('h2', null, 'Safety detection of the account')
  const error = h('p', { class: 'error', role: 'alert', hidden: true })
  const save = h('button', { type: 'submit', class: 'primary', 'data-testid': 'edit-detection-save' }, 'Save')
  const cancel = h('button', { type: 'button', class: 'quiet', 'data-testid': 'edit-detection-cancel' }, 'Cancel')
  const form = h('form', null, heading,
    h('fieldset', { class: 'limits' }, h('legend', null, 'The proxy applies a change from its next call.'),
      h('div', { class: 'limit-fields' },
        field('Policy', policy, 'policy', policyHint),
        field('Threshold: the score that counts as injection (0 to 1; empty: the detector\'s own)', threshold, 'threshold'),
        field('Data threshold: the same for tool results, documents and pasted text (empty: the threshold)', dataThreshold, 'data_threshold'),
        field('Allow phrases, one per line (empty: none)', phrases, 'allow_phrases'))),
    error, h('div', { class: 'form-actions' }, save, cancel))
  const element = h('dialog', { class: 'confirm limits-dialog', 'data-testid': 'edit-detection-dialog' }, form)
  let onSave: ((values: Record<string, unknown>) => Promise<void>) | null = null

  const hint = (): void => { replace(policyHint, describe(policy.value as Policy)) }
  const clearErrors = (): void => {
    for (const [f, el] of errors) {
      el.hidden = true
      el.textContent = ''
      inputs.get(f)?.removeAttribute('aria-invalid')
    }
    error.hidden = true
  }
  /** The server's error beside the field it names; anything else under the fields. */
  const show = (e: unknown): void => {
    const f = e instanceof ApiError && e.param !== null ? e.param as Field : null
    const at = f === null ? undefined : errors.get(f)
    if (at === undefined) {
      replace(error, e instanceof Error ? e.message : String(e))
      error.hidden = false
      return
    }
    replace(at, (e as ApiError).message)
    at.hidden = false
    inputs.get(f!)?.setAttribute('aria-invalid', 'true')
    inputs.get(f!)?.focus()
  }

  policy.addEventListener('change', hint)
  cancel.addEventListener('click', () => { element.close() })
  form.addEventListener('submit', (e) => {
    e.preventDefault()
    if (onSave === null) return
    save.disabled = true
    clearErrors()
    const values = {
      policy: policy.value,
      threshold: threshold.value.trim() === '' ? null : threshold.value.trim(),
      data_threshold: dataThreshold.value.trim() === '' ? null : dataThreshold.value.trim(),
      allow_phrases: phrases.value.split('\n').map((p) => p.trim()).filter((p) => p !== ''),
    }
    onSave(values)
      .then(() => { element.close() })
      .catch(show)
      .finally(() => { save.disabled = false })
  })
  element.addEventListener('close', () => { onSave = null })

  return {
    element,
    open (d, saveFn) {
      policy.value = d.policy
      hint()
      threshold.value = d.threshold === null ? '' : String(d.threshold)
      dataThreshold.value = d.data_threshold === null ? '' : String(d.data_threshold)
      phrases.value = d.allow_phrases.join('\n')
      clearErrors()
      save.disabled = false
      onSave = saveFn
      element.showModal()
    },
    close () { if (element.open) element.close() },
  }
}
