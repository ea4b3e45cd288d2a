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

/** The error code a client sees for an upstream failure before the provider answered. */
export function upstreamErrorCode (err: unknown): ErrorCode {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && TIMEOUTS.has(code) ? 'provider_timeout' : 'provider_unreachable'
}
