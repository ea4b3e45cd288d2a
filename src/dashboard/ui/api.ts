// fetch for the dashboard's JSON API: same-origin cookie, the session's CSRF token on every POST, and
// the server's error body (`{ error: { code, message, param } }`) turned into an ApiError.

export class ApiError extends Error {
  readonly status: number
  readonly code: string
  readonly retryAfter: number | null
  /** The request member the error is about (a form shows it beside that field), or null. */
  readonly param: string | null

  constructor (status: number, code: string, message: string, retryAfter: number | null, param: string | null = null) {
    super(message)
    this.name = 'ApiError'
    this.status = status
    this.code = code
    this.retryAfter = retryAfter
    this.param = param
  }
}

let csrf = ''
let onUnauthenticated: () => void = () => {}

export function setCsrf (token: string): void { csrf = token }
export function csrfToken (): string { return csrf }

/** Called when a request answers 401 `unauthenticated` (the session ended): the app shows sign-in. */
export function whenUnauthenticated (fn: () => void): void { onUnauthenticated = fn }

export type Query = Record<string, string | number | null | undefined>

export function withQuery (path: string, query?: Query): string {
  if (query === undefined) return path
  const p = new URLSearchParams()
  for (const [k, v] of Object.entries(query)) if (v !== null && v !== undefined && v !== '') p.set(k, String(v))
  const s = p.toString()
  return s === '' ? path : `${path}?${s}`
}

async function request<T> (method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' }
  if (method === 'POST') {
    headers['x-csrf-token'] = csrf
    if (body !== undefined) headers['content-type'] = 'application/json'
  }
  const res = await fetch(path, {
    method,
    headers,
    credentials: 'same-origin',
    body: body === undefined ? null : JSON.stringify(body),
  })
  if (res.status === 204) return undefined as T
  const text = await res.text()
  let json: unknown = null
  try { json = text === '' ? null : JSON.parse(text) } catch { json = null }
  if (!res.ok) {
    const err = (json as { error?: { code?: string, message?: string, param?: unknown } } | null)?.error
    const code = err?.code ?? `http_${res.status}`
    const ra = res.headers.get('retry-after')
    const param = typeof err?.param === 'string' ? err.param : null
    const e = new ApiError(res.status, code, err?.message ?? (text.slice(0, 200) || res.statusText), ra === null ? null : Number(ra), param)
    if (res.status === 401 && code === 'unauthenticated' && path !== '/api/ui/session') onUnauthenticated()
    throw e
  }
  return json as T
}

export function get<T> (path: string, query?: Query): Promise<T> {
  return request<T>('GET', withQuery(path, query))
}

export function post<T> (path: string, body?: unknown): Promise<T> {
  return request<T>('POST', path, body)
}
