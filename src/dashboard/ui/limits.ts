// Limits in the UI, for a key (Settings → API Keys) and for the account (Settings → Account): one line per
// limit set, with its use in the current window ("12 / 60 rpm", "$0.42 / $5.00 today"); the limit inputs of
// the create form and of the edit dialog; and the server's invalid_parameter shown beside the field it
// names. The server checks every value (the rules of the CLI), so the inputs are plain text fields.
import { ApiError } from './api.js'
import { h, replace } from './dom.js'
import { bytes, int, usd } from './format.js'
import type { LimitUse, Limits } from './types.js'

export type LimitField = 'rpm' | 'tpm' | 'budget_day' | 'budget_month' | 'models' | 'max_body_bytes'

interface Spec {
  readonly field: LimitField
  readonly label: string
  readonly placeholder: string
  readonly inputmode: 'numeric' | 'decimal' | 'text'
}

const SPECS: readonly Spec[] = [
  { field: 'rpm', label: 'Requests per minute', placeholder: 'no limit', inputmode: 'numeric' },
  { field: 'tpm', label: 'Tokens per minute', placeholder: 'no limit', inputmode: 'numeric' },
  { field: 'budget_day', label: 'Budget per UTC day, USD', placeholder: 'no limit', inputmode: 'decimal' },
  { field: 'budget_month', label: 'Budget per UTC month, USD', placeholder: 'no limit', inputmode: 'decimal' },
  { field: 'models', label: 'Allowed models, comma-separated, * as a wildcard', placeholder: 'any model, e.g. gpt-4o*, claude-3-5-haiku', inputmode: 'text' },
  { field: 'max_body_bytes', label: 'Largest request body, bytes', placeholder: 'no limit', inputmode: 'numeric' },
]

/** One line: the use, then the limit; marked when the use has reached it. */
function line (field: LimitField, text: string, reached = false): HTMLElement {
  return h('li', { 'data-limit': field, class: reached ? 'reached' : null }, text)
}

/** The limits that are set, each with its use when known; "—" when none is set. */
export function limitLines (l: Limits, use: LimitUse | null): HTMLElement {
  const lines: HTMLElement[] = []
  const pair = (used: string, limit: string): string => (use === null ? limit : `${used} / ${limit}`)
  if (l.rpm !== null) lines.push(line('rpm', `${pair(int(use?.rpm), int(l.rpm))} rpm`, use !== null && use.rpm >= l.rpm))
  if (l.tpm !== null) lines.push(line('tpm', `${pair(int(use?.tpm), int(l.tpm))} tpm`, use !== null && use.tpm >= l.tpm))
  if (l.budget_day !== null) {
    lines.push(line('budget_day', `${pair(usd(use?.budget_day ?? 0), usd(l.budget_day))} today`, use !== null && use.budget_day >= l.budget_day))
  }
  if (l.budget_month !== null) {
    lines.push(line('budget_month', `${pair(usd(use?.budget_month ?? 0), usd(l.budget_month))} this month`, use !== null && use.budget_month >= l.budget_month))
  }
  if (l.models !== null) lines.push(line('models', `models: ${l.models.join(', ')}`))
  if (l.max_body_bytes !== undefined && l.max_body_bytes !== null) lines.push(line('max_body_bytes', `body ≤ ${bytes(l.max_body_bytes)}`))
  return lines.length === 0 ? h('span', { class: 'muted', 'data-limit': 'none' }, '—') : h('ul', { class: 'limit-lines' }, ...lines)
}

/** Each limit's current use as a hint under its input. */
function useHint (field: LimitField, u: LimitUse): string | null {
  switch (field) {
    case 'rpm': return `${int(u.rpm)} requests this minute`
    case 'tpm': return `${int(u.tpm)} tokens this minute`
    case 'budget_day': return `${usd(u.budget_day)} spent today (UTC)`
    case 'budget_month': return `${usd(u.budget_month)} spent this month (UTC)`
    default: return null
  }
}

export interface LimitInputs {
  readonly element: HTMLElement
  /** Shows these limits in the inputs, and each limit's use beside it when given. */
  fill (l: Limits, use?: LimitUse): void
  /** The fields filled in (a create: an empty field sets no limit). */
  filled (): Record<string, string>
  /** Every field, an empty one as null (an update: null removes the limit). */
  all (): Record<string, string | null>
  clearErrors (): void
  /** Shows an API error beside the field it names; false when it names none of these fields. */
  showError (e: unknown): boolean
}

/** The limit inputs, as a fieldset; the account's have no body size. `id` keeps element ids unique on the page. */
export function limitInputs (id: string, forAccount: boolean, legend: string): LimitInputs {
  const specs = SPECS.filter((s) => !forAccount || s.field !== 'max_body_bytes')
  const inputs = new Map<LimitField, { input: HTMLInputElement, hint: HTMLElement, error: HTMLElement }>()
  const fields = specs.map((s) => {
    const errorId = `${id}-${s.field}-error`
    const input = h('input', {
      name: s.field, inputmode: s.inputmode, placeholder: s.placeholder, autocomplete: 'off', spellcheck: 'false', 'aria-describedby': errorId,
    })
    const hint = h('span', { class: 'muted hint', hidden: true })
    const error = h('span', { class: 'error field-error', id: errorId, 'data-testid': `limit-error-${s.field}`, role: 'alert', hidden: true })
    inputs.set(s.field, { input, hint, error })
    return h('div', { class: s.field === 'models' ? 'field wide' : 'field' }, h('label', null, h('span', null, s.label), input), hint, error)
  })
  const element = h('fieldset', { class: 'limits' }, h('legend', null, legend), h('div', { class: 'limit-fields' }, ...fields))

  const clearErrors = (): void => {
    for (const { input, error } of inputs.values()) {
      input.removeAttribute('aria-invalid')
      error.hidden = true
      error.textContent = ''
    }
  }
  return {
    element,
    fill (l, use) {
      clearErrors()
      for (const [field, { input, hint }] of inputs) {
        const v = l[field]
        input.value = v === null || v === undefined ? '' : Array.isArray(v) ? v.join(', ') : String(v)
        const text = use === undefined ? null : useHint(field, use)
        replace(hint, text ?? '')
        hint.hidden = text === null
      }
    },
    filled () {
      const out: Record<string, string> = {}
      for (const [field, { input }] of inputs) if (input.value.trim() !== '') out[field] = input.value.trim()
      return out
    },
    all () {
      const out: Record<string, string | null> = {}
      for (const [field, { input }] of inputs) out[field] = input.value.trim() === '' ? null : input.value.trim()
      return out
    },
    clearErrors,
    showError (e) {
      const at = e instanceof ApiError && e.param !== null ? inputs.get(e.param as LimitField) : undefined
      if (at === undefined) return false
      replace(at.error, (e as ApiError).message)
      at.error.hidden = false
      at.input.setAttribute('aria-invalid', 'true')
      at.input.focus()
      return true
    },
  }
}

export interface LimitsDialog {
  readonly element: HTMLDialogElement
  /** Opens with these limits; Save hands every field to `save` (empty = removed) and closes when it resolves. */
  open (title: string, l: Limits, use: LimitUse, save: (values: Record<string, string | null>) => Promise<void>): void
  close (): void
}

/** The "Edit limits" dialog: a real <dialog>, errors beside their field, anything else under the fields. */
export function limitsDialog (id: string, forAccount: boolean): LimitsDialog {
  const heading = h('h2')
  const fields = limitInputs(id, forAccount, 'An empty field removes that limit.')
  const error = h('p', { class: 'error', role: 'alert', hidden: true })
  const save = h('button', { type: 'submit', class: 'primary', 'data-testid': 'edit-limits-save' }, 'Save')
  const cancel = h('button', { type: 'button', class: 'quiet', 'data-testid': 'edit-limits-cancel' }, 'Cancel')
  const form = h('form', null, heading, fields.element, error, h('div', { class: 'form-actions' }, save, cancel))
  const element = h('dialog', { class: 'confirm limits-dialog', 'data-testid': 'edit-limits' }, form)
  let onSave: ((values: Record<string, string | null>) => Promise<void>) | null = null

  cancel.addEventListener('click', () => { element.close() })
  form.addEventListener('submit', (e) => {
    e.preventDefault()
    if (onSave === null) return
    save.disabled = true
    fields.clearErrors()
    error.hidden = true
    onSave(fields.all())
      .then(() => { element.close() })
      .catch((err: unknown) => {
        if (fields.showError(err)) return
        replace(error, err instanceof Error ? err.message : String(err))
        error.hidden = false
      })
      .finally(() => { save.disabled = false })
  })
  element.addEventListener('close', () => { onSave = null })

  return {
    element,
    open (title, l, use, saveFn) {
      replace(heading, title)
      fields.fill(l, use)
      error.hidden = true
      save.disabled = false
      onSave = saveFn
      element.showModal()
    },
    close () { if (element.open) element.close() },
  }
}
