// Sign-in: shown at /signin and in place of any page while signed out.
import { ApiError, post } from './api.js'
import { h, replace } from './dom.js'
import type { Session } from './types.js'

/** A retry-after in seconds as a person reads it: "40 s", "15 min". */
function waitText (seconds: number): string {
  return seconds < 90 ? `${Math.ceil(seconds)} s` : `${Math.ceil(seconds / 60)} min`
}

export function signin (root: HTMLElement, done: (s: Session) => void): void {
  const email = h('input', { name: 'email', type: 'email', autocomplete: 'username', required: true, autofocus: true })
  const password = h('input', { name: 'password', type: 'password', autocomplete: 'current-password', required: true })
  const submit = h('button', { type: 'submit', class: 'primary', 'data-testid': 'signin-submit' }, 'Sign in')
  const error = h('p', { class: 'error', 'data-testid': 'signin-error', role: 'alert', hidden: true })
  const form = h('form', { class: 'card signin', 'data-testid': 'signin-form', method: 'post', action: '/signin' },
    h('h1', null, 'tracegate'),
    h('p', { class: 'muted' }, 'Sign in to see your LLM traffic.'),
    h('label', null, h('span', null, 'Email'), email),
    h('label', null, h('span', null, 'Password'), password),
    error,
    submit)

  form.addEventListener('submit', (e) => {
    e.preventDefault()
    submit.disabled = true
    error.hidden = true
    post<Session>('/api/ui/signin', { email: email.value, password: password.value })
      .then(done)
      .catch((err: unknown) => {
        let text = 'Sign-in failed. Try again.'
        if (err instanceof ApiError) {
          if (err.code === 'invalid_credentials') text = 'Wrong email or password.'
          else if (err.code === 'too_many_attempts') text = `Too many failed attempts. Try again${err.retryAfter !== null && Number.isFinite(err.retryAfter) ? ` in ${waitText(err.retryAfter)}` : ' later'}.`
          else text = err.message
        }
        replace(error, text)
        error.hidden = false
        password.select()
      })
      .finally(() => { submit.disabled = false })
  })
  replace(root, form)
  email.focus()
}
