// Settings → API Keys: create (the value is shown once) with optional limits, list with each key's limits
// and their use and its last use (kept current by the live feed), edit a key's limits in a dialog, revoke
// behind a confirmation dialog.
import { get, post } from './api.js'
import { copyButton } from './clipboard.js'
import { h, options, replace } from './dom.js'
import { ago, dateTime, day, fullTime, toMs } from './format.js'
import { limitInputs, limitLines, limitsDialog } from './limits.js'
import { Live } from './live.js'
import type { Page } from './main.js'
import type { ApiKey } from './types.js'

const EXPIRES: ReadonlyArray<readonly [string, string]> = [
  ['never', 'Never'], ['7', 'In 7 days'], ['30', 'In 30 days'], ['90', 'In 90 days'], ['365', 'In 1 year'],
]
const SCOPES: ReadonlyArray<readonly [string, string]> = [
  ['proxy', 'proxy — send calls through the proxy'], ['read', 'read — read traces and usage (read API)'],
  ['sql', 'sql — query your traces in SQL (SQL port)'],
]

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/** A key's last use: the date and time, with the full time and how long ago in its title. */
function lastUse (t: string | number | null): Node | string {
  return t === null || t === '' ? 'never' : h('span', { title: `${fullTime(t)} (${ago(t)})` }, dateTime(t))
}

function keyRow (k: ApiKey, edit: (k: ApiKey) => void, revoke: (k: ApiKey) => void): HTMLTableRowElement {
  const date = (t: string | number | null, none: string, show = day): Node | string =>
    t === null || t === '' ? none : h('span', { title: fullTime(t) }, show(t))
  const actions = h('td', { class: 'actions' })
  // A key that no longer works has nothing left to limit or revoke.
  if (k.status === 'active') {
    const e = h('button', { type: 'button', class: 'quiet', 'data-testid': 'edit-limits-open' }, 'Edit limits')
    e.addEventListener('click', () => edit(k))
    const b = h('button', { type: 'button', class: 'danger quiet', 'data-testid': 'revoke-key' }, 'Revoke')
    b.addEventListener('click', () => revoke(k))
    actions.append(e, b)
  }
  return h('tr', { 'data-testid': 'key-row', 'data-key-id': k.id, class: k.status === 'active' ? null : 'inactive' },
    h('td', { 'data-col': 'name', 'data-label': 'Name' }, k.name),
    h('td', { 'data-col': 'prefix', 'data-label': 'Prefix' }, h('code', null, `${k.prefix}…`)),
    h('td', { 'data-col': 'scope', 'data-label': 'Scope' }, k.scope),
    h('td', { 'data-col': 'created', 'data-label': 'Created' }, date(k.created_at, '—')),
    h('td', { 'data-col': 'expires', 'data-label': 'Expires' }, date(k.expires_at, 'never')),
    h('td', { 'data-col': 'last_used', 'data-label': 'Last used', 'data-time': k.last_used_at ?? '' }, lastUse(k.last_used_at)),
    h('td', { 'data-col': 'limits', 'data-label': 'Limits' }, limitLines(k.limits, k.use)),
    h('td', { 'data-col': 'status', 'data-label': 'Status' }, h('span', { class: `badge key-${k.status}` }, k.status)),
    actions)
}

export const keys: Page = (root) => {
  const create = h('button', { type: 'button', class: 'primary', 'data-testid': 'create-key' }, 'Create API Key')

  const name = h('input', { name: 'name', required: true, maxlength: 100, placeholder: 'e.g. backend production' })
  const scope = h('select', { name: 'scope' }, ...options(SCOPES, 'proxy'))
  const expires = h('select', { name: 'expires' }, ...options(EXPIRES, 'never'))
  const submit = h('button', { type: 'submit', class: 'primary', 'data-testid': 'create-key-submit' }, 'Create key')
  const cancel = h('button', { type: 'button', class: 'quiet' }, 'Cancel')
  const formError = h('p', { class: 'error', role: 'alert', hidden: true })
  const limits = limitInputs('create-key', false, 'Limits (optional: an empty field sets no limit)')
  const form = h('form', { class: 'card create-key', 'data-testid': 'create-key-form', hidden: true },
    h('h2', null, 'Create API Key'),
    h('div', { class: 'form-row' },
      h('label', null, h('span', null, 'Name'), name),
      h('label', null, h('span', null, 'Scope'), scope),
      h('label', null, h('span', null, 'Expires'), expires)),
    limits.element,
    formError,
    h('div', { class: 'form-actions' }, submit, cancel))

  // Holds the created key while it is shown; empty otherwise, so the value exists in the page only then.
  const created = h('div')
  const body = h('tbody')
  const listError = h('p', { class: 'error', hidden: true })
  // On a narrow screen each key is a stacked card, its cells labelled by data-label (app.css).
  const table = h('table', { class: 'list keys stack', 'data-testid': 'key-list' },
    h('thead', null, h('tr', null, ...['Name', 'Prefix', 'Scope', 'Created', 'Expires', 'Last used', 'Limits (use / limit)', 'Status', ''].map((x) => h('th', null, x)))),
    body)

  const editDialog = limitsDialog('edit-key-limits', false)
  const target = h('strong')
  const revokeError = h('p', { class: 'error', role: 'alert', hidden: true })
  const yes = h('button', { type: 'button', class: 'danger', 'data-testid': 'confirm-revoke-yes' }, 'Revoke key')
  const no = h('button', { type: 'button', class: 'quiet', 'data-testid': 'confirm-revoke-no' }, 'Cancel')
  const dialog = h('dialog', { 'data-testid': 'confirm-revoke', class: 'confirm' },
    h('h2', null, 'Revoke this key?'),
    h('p', null, 'Key ', target, ' will stop working at once: every call made with it is refused. This cannot be undone.'),
    revokeError,
    h('div', { class: 'form-actions' }, yes, no))

  replace(root,
    h('div', { class: 'page-head' }, h('h1', null, 'API Keys'), create),
    form, created, listError,
    h('section', { class: 'card' }, h('div', { class: 'table-wrap' }, table)),
    dialog, editDialog.element)

  const edit = (k: ApiKey): void => {
    editDialog.open(`Limits of “${k.name}”`, k.limits, k.use, async (values) => {
      await post<{ key: ApiKey }>(`/api/ui/keys/${encodeURIComponent(k.id)}/limits`, values)
      load()
    })
  }

  let pending: ApiKey | null = null
  const revoke = (k: ApiKey): void => {
    pending = k
    replace(target, `${k.name} (${k.prefix}…)`)
    revokeError.hidden = true
    yes.disabled = false
    dialog.showModal()
  }

  /** The newest use shown per key (from the live feed or a read): a list answer read before it does not undo it. */
  const liveUse = new Map<string, string>()
  const newer = (a: string | number | null, b: string | number | null): boolean => (toMs(a) ?? -Infinity) > (toMs(b) ?? -Infinity)

  const load = (): void => {
    get<{ keys: ApiKey[] }>('/api/ui/keys').then(({ keys }) => {
      listError.hidden = true
      const frag = document.createDocumentFragment()
      for (const k of keys) {
        const seen = liveUse.get(k.id) ?? null
        frag.appendChild(keyRow(newer(seen, k.last_used_at) ? { ...k, last_used_at: seen } : k, edit, revoke))
      }
      if (keys.length === 0) frag.appendChild(h('tr', { class: 'empty-row' }, h('td', { colspan: 9, class: 'muted' }, 'No keys yet.')))
      replace(body, frag)
    }).catch((e: unknown) => {
      replace(listError, `Could not load keys: ${message(e)}`)
      listError.hidden = false
    })
  }

  create.addEventListener('click', () => {
    form.hidden = false
    created.textContent = ''
    formError.hidden = true
    limits.clearErrors()
    name.focus()
  })
  cancel.addEventListener('click', () => { form.hidden = true; form.reset(); limits.clearErrors() })

  form.addEventListener('submit', (e) => {
    e.preventDefault()
    submit.disabled = true
    formError.hidden = true
    limits.clearErrors()
    const days = expires.value === 'never' ? null : Number(expires.value)
    post<{ key: ApiKey & { key: string } }>('/api/ui/keys', { name: name.value.trim(), scope: scope.value, expires_in_days: days, ...limits.filled() })
      .then(({ key }) => {
        form.hidden = true
        form.reset()
        const value = h('code', { class: 'key-value', 'data-testid': 'created-key-value' }, key.key)
        const copyBtn = copyButton(() => key.key, value, { 'data-testid': 'copy-key' })
        const done = h('button', { type: 'button', class: 'quiet' }, 'Done')
        done.addEventListener('click', () => { created.textContent = '' })
        replace(created, h('div', { class: 'card created-key', 'data-testid': 'created-key' },
          h('h2', null, `Key “${key.name}” created`),
          h('p', { class: 'warning', 'data-testid': 'created-key-warning' },
            'Copy this key now. It is shown only this once and cannot be shown again; if you lose it, revoke it and create a new one.'),
          h('div', { class: 'key-box' }, value, copyBtn),
          h('div', { class: 'form-actions' }, done)))
        load()
      })
      .catch((err: unknown) => {
        if (limits.showError(err)) return
        replace(formError, message(err))
        formError.hidden = false
      })
      .finally(() => { submit.disabled = false })
  })

  no.addEventListener('click', () => { dialog.close(); pending = null })
  yes.addEventListener('click', () => {
    const k = pending
    if (k === null) return
    yes.disabled = true
    post<{ key: ApiKey }>(`/api/ui/keys/${encodeURIComponent(k.id)}/revoke`)
      .then(() => { dialog.close(); pending = null; load() })
      .catch((e: unknown) => {
        replace(revokeError, message(e))
        revokeError.hidden = false
        yes.disabled = false
      })
  })

  // A key's last use moves as its calls are stored, without a reload: the live feed carries each trace's
  // key and time. Only that cell changes; the rows stay as they are.
  const used = (keyId: string, time: string): void => {
    if (!newer(time, liveUse.get(keyId) ?? null)) return
    liveUse.set(keyId, time)
    const cell = body.querySelector<HTMLTableCellElement>(`tr[data-key-id="${CSS.escape(keyId)}"] td[data-col=last_used]`)
    if (cell === null || !newer(time, cell.dataset.time ?? null)) return
    cell.dataset.time = time
    replace(cell, lastUse(time))
  }
  const live = new Live({
    traces (items) { for (const tr of items) used(tr.key_id, tr.time) },
    // Once open (again), the last uses are read anew: a call stored before the socket was open is not sent on it.
    state (st) {
      table.dataset.live = st
      if (st !== 'live') return
      get<{ keys: ApiKey[] }>('/api/ui/keys').then(({ keys }) => {
        for (const k of keys) if (k.last_used_at !== null) used(k.id, String(k.last_used_at))
      }).catch(() => {})
    },
    reconnected () {},
  })

  load()
  return () => {
    live.close()
    if (dialog.open) dialog.close()
    editDialog.close()
  }
}
