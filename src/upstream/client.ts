// The upstream HTTP client: one undici Agent (a keep-alive pool per provider origin) for the process.
import { Agent } from 'undici'
import type { Config } from '../config.js'
import type { ErrorCode } from '../errors.js'

export function createUpstreamAgent (config: Config): Agent {
  return new Agent({
    connections: config.upstream.connections,
    connectTimeout: config.upstream.connectTimeoutMs,
    headersTimeout: config.upstream.headersTimeoutMs,
    bodyTimeout: config.upstream.bodyTimeoutMs,
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 600_000,
    // Passthrough needs the raw body; never let the pool retry a POST on its own.
    pipelining: 1,
  })
}

const TIMEOUTS = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT'])

const CAUSES: ReadonlyArray<[RegExp, string]> = [
  [/^ECONNREFUSED$/, 'connect_refused'],
  [/^(ENOTFOUND|EAI_AGAIN|EAI_NONAME)$/, 'dns'],
  [/^UND_ERR_CONNECT_TIMEOUT$/, 'connect_timeout'],
  [/^UND_ERR_HEADERS_TIMEOUT$/, 'headers_timeout'],
  [/^UND_ERR_BODY_TIMEOUT$/, 'body_timeout'],
  [/^ETIMEDOUT$/, 'timeout'],
  [/^(ECONNRESET|EPIPE)$/, 'reset'],
  [/^UND_ERR_SOCKET$/, 'socket_closed'],
  [/^(EHOSTUNREACH|ENETUNREACH|EADDRNOTAVAIL)$/, 'unreachable'],
  [/^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|EPROTO$)/, 'tls'],
  [/^(UND_ERR_INVALID_ARG|ERR_INVALID_CHAR|ERR_INVALID_HTTP_TOKEN)$/, 'invalid_header'],
  [/^(HPE_|UND_ERR_RES_|UND_ERR_INFO$)/, 'bad_response'],
]

/**
 * Why an upstream request or a fault failed, as `kind: message` for logs and the trace's error_cause:
 * the kind from the error's code (its cause's, for fetch-style wrappers), the message undici or the
 * runtime wrote. Neither ever holds a header value, so no key can appear here.
 */
export function describeCause (err: unknown): string {
  let e = err as { code?: unknown; message?: unknown; cause?: unknown } | null
  let code = typeof e?.code === 'string' ? e.code : ''
  if (code === '' && typeof (e?.cause as { code?: unknown } | undefined)?.code === 'string') {
    e = e!.cause as typeof e
    code = e!.code as string
  }
  const kind = CAUSES.find(([re]) => re.test(code))?.[1] ?? (code === '' ? 'error' : code.toLowerCase())
  const message = String(e?.message ?? err).split('\n')[0]!.slice(0, 300)
  return `${kind}: ${message}`
}

/** The error code a client sees for an upstream failure before the provider answered. */
export function upstreamErrorCode (err: unknown): ErrorCode {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && TIMEOUTS.has(code) ? 'provider_timeout' : 'provider_unreachable'
}
