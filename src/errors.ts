// The one table of errors tracegate answers with. Every error the proxy, the admin API or the dashboard
// sends is one of these codes; `toErrorBody` in server/respond.ts is the one place that turns it into
// a response. Tests assert on `code`, never on `message`.

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'provider_error'
  | 'rate_limit_error'
  | 'api_error'

export interface ErrorSpec {
  readonly status: number
  readonly type: ErrorType
  readonly message: string
}

export const ERRORS = {
  body_too_large: { status: 413, type: 'invalid_request_error', message: 'The request body is larger than the limit.' },
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'The request body must be a JSON object in valid UTF-8.' },
  duplicate_field: { status: 400, type: 'invalid_request_error', message: 'A service field appears more than once in the body.' },
  service_field_not_allowed: { status: 400, type: 'invalid_request_error', message: 'A field of tracegate\'s contract endpoints (api_key, is_confidential, a provider key field) is not accepted in a provider route\'s body; send the keys and confidentiality in the x-tracegate-* headers.' },
  missing_api_key: { status: 400, type: 'invalid_request_error', message: 'The body has no api_key field.' },
  missing_tracegate_key: { status: 401, type: 'authentication_error', message: 'No tracegate key: send it as the SDK\'s API key or in the x-tracegate-key header.' },
  invalid_field: { status: 422, type: 'invalid_request_error', message: 'A field has the wrong type or is not allowed here.' },
  invalid_api_key: { status: 401, type: 'authentication_error', message: 'The tracegate key is not valid.' },
  expired_api_key: { status: 401, type: 'authentication_error', message: 'The tracegate key has expired.' },
  revoked_api_key: { status: 401, type: 'authentication_error', message: 'The tracegate key has been revoked.' },
  sql_not_allowed: { status: 403, type: 'permission_error', message: 'The SQL port runs one SELECT over the account\'s tables; this query reads or does something else.' },
  sql_error: { status: 400, type: 'invalid_request_error', message: 'ClickHouse refused the query.' },
  sql_busy: { status: 429, type: 'rate_limit_error', message: 'This account already has as many SQL queries running as allowed; retry when one ends.' },
  wrong_key_scope: { status: 401, type: 'authentication_error', message: 'The tracegate key does not have the scope this endpoint needs.' },
  plan_required: { status: 403, type: 'permission_error', message: 'The proxy needs the pro or enterprise plan.' },
  missing_parameter: { status: 400, type: 'invalid_request_error', message: 'A parameter the provider requires is missing.' },
  missing_provider_key: { status: 400, type: 'invalid_request_error', message: 'No provider key was given and no server-side key is allowed or configured.' },
  prompt_injection_detected: { status: 403, type: 'permission_error', message: 'The prompt was blocked: it looks like a prompt injection or jailbreak.' },
  model_not_allowed: { status: 403, type: 'permission_error', message: 'This key may not use that model.' },
  model_not_priced: { status: 403, type: 'permission_error', message: 'The model has no price, and a spend budget applies to this key or its account.' },
  rate_limited: { status: 429, type: 'rate_limit_error', message: 'A rate limit of this key or its account was reached; retry after the time given.' },
  budget_exceeded: { status: 429, type: 'rate_limit_error', message: 'A spend budget of this key or its account is used up for this period.' },
  detection_unavailable: { status: 503, type: 'api_error', message: 'Safety detection could not judge the request in time; it was not forwarded.' },
  provider_unreachable: { status: 500, type: 'provider_error', message: 'The provider could not be reached.' },
  provider_timeout: { status: 500, type: 'provider_error', message: 'The provider did not answer in time.' },
  provider_disconnected: { status: 500, type: 'provider_error', message: 'The provider closed the connection before its answer was complete.' },
  malformed_request: { status: 400, type: 'invalid_request_error', message: 'The request is not well-formed HTTP/1.1 (conflicting or duplicate framing headers).' },
  internal_error: { status: 500, type: 'api_error', message: 'An internal error occurred.' },
  service_unavailable: { status: 503, type: 'api_error', message: 'The server is shutting down or not ready.' },
  not_found: { status: 404, type: 'not_found_error', message: 'No such endpoint.' },
  method_not_allowed: { status: 405, type: 'invalid_request_error', message: 'This endpoint does not accept that method.' },
  unauthorized: { status: 401, type: 'authentication_error', message: 'Authentication is required.' },
  // Dashboard and read API.
  invalid_credentials: { status: 401, type: 'authentication_error', message: 'The email or the password is wrong.' },
  too_many_attempts: { status: 429, type: 'rate_limit_error', message: 'Too many failed sign-ins; try again later.' },
  unauthenticated: { status: 401, type: 'authentication_error', message: 'Sign in first; the session is missing or has expired.' },
  csrf_failed: { status: 403, type: 'permission_error', message: 'The request failed the cross-site request forgery check.' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error', message: 'The body must be JSON (content-type: application/json).' },
  invalid_parameter: { status: 400, type: 'invalid_request_error', message: 'A parameter has a value that is not allowed.' },
  trace_not_found: { status: 404, type: 'not_found_error', message: 'No such trace.' },
  key_not_found: { status: 404, type: 'not_found_error', message: 'No such key.' },
  session_not_found: { status: 404, type: 'not_found_error', message: 'No call of this account carries that session id.' },
  // Admin commands (the CLI, the local admin socket) and the store behind them.
  missing_argument: { status: 400, type: 'invalid_request_error', message: 'A required argument is missing.' },
  invalid_argument: { status: 400, type: 'invalid_request_error', message: 'An argument has a value that is not allowed.' },
  unknown_account: { status: 404, type: 'not_found_error', message: 'No such account.' },
  email_taken: { status: 409, type: 'invalid_request_error', message: 'A user with that email already exists.' },
  not_allowed: { status: 403, type: 'permission_error', message: 'This operation is not allowed here.' },
  clickhouse_unavailable: { status: 503, type: 'api_error', message: 'ClickHouse is not reachable.' },
  unknown_user: { status: 404, type: 'not_found_error', message: 'No user with that email.' },
} as const satisfies Record<string, ErrorSpec>

export type ErrorCode = keyof typeof ERRORS

export function isErrorCode (code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERRORS, code)
}

export class TracegateError extends Error {
  readonly code: ErrorCode
  readonly status: number
  readonly type: ErrorType
  readonly param: string | null
  /** More members of the error object (the findings of a blocked prompt). */
  readonly extra: Readonly<Record<string, unknown>> | null

  constructor (code: ErrorCode, options: { message?: string; param?: string | null; cause?: unknown; extra?: Record<string, unknown> } = {}) {
    const spec: ErrorSpec = ERRORS[code]
    super(options.message ?? spec.message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'TracegateError'
    this.code = code
    this.status = spec.status
    this.type = spec.type
    this.param = options.param ?? null
    this.extra = options.extra ?? null
  }
}

/**
 * A 413 that states the limit the body passed, in bytes, and whose limit it is (`this server's`, `the
 * dashboard's`); `setting` names the variable that sets it, when one does.
 */
export function bodyTooLarge (limitBytes: number, whose: string, setting?: string): TracegateError {
  const by = setting === undefined ? '' : ` (${setting})`
  return new TracegateError('body_too_large', { message: `The request body is larger than ${whose} limit of ${limitBytes} bytes${by}.` })
}
