// The SQL port (TRACEGATE_SQL_PORT): ClickHouse's HTTP interface as BI tools and the official clients use
// it, for `sql` keys. It runs on the main thread and only relays: the store worker checks and runs each
// query (store/worker/sql-query.ts), on ClickHouse's threads below the proxy's priority, so a heavy
// query costs its own time, never a proxy call's. Errors are ClickHouse's text form
// (`Code: N. DB::Exception: <tracegate code>: … (TYPE)`), which the clients parse, with the tracegate code
// also in the X-Tracegate-Error-Code header.
import { performance } from 'node:perf_hooks'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { promisify } from 'node:util'
import { brotliCompress, brotliDecompress, deflate, gunzip, gzip, inflate, type ZlibOptions } from 'node:zlib'
import { authenticate } from '../auth/authenticate.js'
import type { KeyCache } from '../auth/cache.js'
import type { SqlConfig } from '../config.js'
import { ERRORS, TracegateError, type ErrorCode } from '../errors.js'
import type { StoreClient } from '../store/client.js'
import type { Metrics, SqlResultLabel } from '../metrics.js'

const MAX_REQUEST_BYTES = 1024 * 1024
/** The ClickHouse server version the port reports in its headers (the clients only log it). */
const SERVER_NAME = 'tracegate'

/** Settings the clients send to shape the HTTP exchange itself: accepted, and they change no query. */
const HTTP_SETTINGS: ReadonlySet<string> = new Set([
  'wait_end_of_query', 'send_progress_in_http_headers', 'http_headers_progress_interval_ms', 'enable_http_compression',
  'http_zlib_compression_level', 'cancel_http_readonly_queries_on_client_close', 'add_http_cors_header', 'output_format_json_quote_64bit_integers',
  'date_time_input_format', 'session_timeout', 'session_check', 'compress', 'decompress', 'database', 'query_id', 'session_id', 'user', 'password',
  'readonly', 'max_result_rows', 'max_result_bytes', 'max_execution_time', 'max_memory_usage', 'extremes', 'http_native_compression_disable_checksumming_on_decompress',
])

/** The ClickHouse code and name each of the port's own refusals is sent as. */
const CH_CODES: Partial<Record<ErrorCode, readonly [number, string]>> = {
  sql_not_allowed: [497, 'ACCESS_DENIED'],
  sql_busy: [202, 'TOO_MANY_SIMULTANEOUS_QUERIES'],
  invalid_api_key: [516, 'AUTHENTICATION_FAILED'],
  expired_api_key: [516, 'AUTHENTICATION_FAILED'],
  revoked_api_key: [516, 'AUTHENTICATION_FAILED'],
  wrong_key_scope: [516, 'AUTHENTICATION_FAILED'],
  unauthorized: [516, 'AUTHENTICATION_FAILED'],
  invalid_parameter: [36, 'BAD_ARGUMENTS'],
  body_too_large: [36, 'BAD_ARGUMENTS'],
}

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  JSON: 'application/json; charset=UTF-8',
  JSONCompact: 'application/json; charset=UTF-8',
  JSONStrings: 'application/json; charset=UTF-8',
  JSONCompactStrings: 'application/json; charset=UTF-8',
  CSV: 'text/csv; charset=UTF-8; header=absent',
  CSVWithNames: 'text/csv; charset=UTF-8; header=present',
  CSVWithNamesAndTypes: 'text/csv; charset=UTF-8; header=present',
}

function contentType (format: string): string {
  if (CONTENT_TYPES[format] !== undefined) return CONTENT_TYPES[format]
  if (format.startsWith('JSON') || format === 'NDJSON') return 'application/x-ndjson; charset=UTF-8'
  if (format.startsWith('T')) return 'text/tab-separated-values; charset=UTF-8'
  if (format.startsWith('Pretty') || format === 'Values') return 'text/plain; charset=UTF-8'
  return 'application/octet-stream'
}

const gzipAsync = promisify(gzip)
const deflateAsync = promisify(deflate)
const brotliAsync = promisify(brotliCompress)
type Decode = (b: Buffer, o: ZlibOptions) => Promise<Buffer>
/** Decoders that stop past the size a query may have, so a small compressed body cannot fill the memory. */
const DECODERS: Readonly<Record<string, Decode>> = {
  gzip: promisify(gunzip) as Decode, deflate: promisify(inflate) as Decode, br: promisify(brotliDecompress) as Decode,
}

const ESCAPES: Readonly<Record<string, string>> = { n: '\n', t: '\t', r: '\r', b: '\b', f: '\f', '0': '\0' }

/**
 * A `param_*` value as the HTTP interface reads it: in TabSeparated's escaped form (`\t`, `\n`, `\\`, …),
 * unescaped here because the store's client escapes the value again when it binds it.
 */
function unescapeParam (value: string): string {
  return value.replace(/\\(.)/gs, (_, c: string) => ESCAPES[c] ?? c)
}

export interface SqlServerOptions {
  readonly store: StoreClient
  readonly keys: KeyCache
  readonly config: SqlConfig
  readonly metrics: Metrics
}

/** The key a request carries: basic auth's password, X-ClickHouse-Key, or the `password` parameter. */
function keyOf (req: IncomingMessage, url: URL): string | null {
  const header = req.headers['x-clickhouse-key']
  if (typeof header === 'string' && header !== '') return header
  const auth = req.headers.authorization
  if (typeof auth === 'string') {
    const m = /^Basic +(\S+)\s*$/i.exec(auth)
    if (m !== null) {
      const decoded = Buffer.from(m[1]!, 'base64').toString('utf8')
      const colon = decoded.indexOf(':')
      if (colon >= 0 && colon < decoded.length - 1) return decoded.slice(colon + 1)
    }
  }
  const param = url.searchParams.get('password')
  return param === null || param === '' ? null : param
}

async function readBody (req: IncomingMessage): Promise<Buffer> {
  const parts: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > MAX_REQUEST_BYTES) throw new TracegateError('body_too_large', { message: `the query is larger than ${MAX_REQUEST_BYTES} bytes` })
    parts.push(chunk as Buffer)
  }
  const body = Buffer.concat(parts)
  const encoding = req.headers['content-encoding']
  if (typeof encoding === 'string' && encoding !== '' && encoding !== 'identity') {
    const decode = DECODERS[encoding.toLowerCase()]
    if (decode === undefined) throw new TracegateError('invalid_parameter', { message: `Content-Encoding ${encoding} is not supported` })
    const out = await decode(body, { maxOutputLength: MAX_REQUEST_BYTES + 1 }).catch((err: unknown) => {
      if ((err as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') throw new TracegateError('body_too_large', { message: `the query is larger than ${MAX_REQUEST_BYTES} bytes` })
      throw new TracegateError('invalid_parameter', { message: 'the request body could not be decompressed' })
    })
    if (out.length > MAX_REQUEST_BYTES) throw new TracegateError('body_too_large', { message: `the query is larger than ${MAX_REQUEST_BYTES} bytes` })
    return out
  }
  return body
}

export class SqlServer {
  readonly #server: Server
  readonly #opts: SqlServerOptions
  /** Queries running per account. */
  readonly #running = new Map<string, number>()

  private constructor (server: Server, opts: SqlServerOptions) {
    this.#server = server
    this.#opts = opts
  }

  static async start (opts: SqlServerOptions, host: string, port: number): Promise<SqlServer> {
    const server = createServer()
    const self = new SqlServer(server, opts)
    server.on('request', (req, res) => { void self.#handle(req, res) })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, host, () => { server.off('error', reject); resolve() })
    })
    return self
  }

  get port (): number {
    return (this.#server.address() as AddressInfo).port
  }

  close (): Promise<void> {
    return new Promise((resolve) => {
      this.#server.close(() => { resolve() })
      this.#server.closeAllConnections()
    })
  }

  async #handle (req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.setHeader('X-ClickHouse-Server-Display-Name', SERVER_NAME)
    const started = performance.now()
    let counted = false
    const count = (result: SqlResultLabel): void => {
      counted = true
      this.#opts.metrics.sqlQuery(result, (performance.now() - started) / 1000)
    }
    try {
      const url = new URL(req.url ?? '/', 'http://sql')
      if (url.pathname === '/ping' || (url.pathname === '/' && req.method === 'GET' && !url.searchParams.has('query'))) {
        res.writeHead(200, { 'content-type': 'text/plain; charset=UTF-8' }).end('Ok.\n')
        return
      }
      if (url.pathname !== '/' || (req.method !== 'GET' && req.method !== 'POST')) {
        throw new TracegateError('invalid_parameter', { message: 'the SQL port answers GET and POST on / and GET /ping' })
      }
      const key = keyOf(req, url)
      if (key === null) throw new TracegateError('unauthorized', { message: 'send a sql key as the password (basic auth or X-ClickHouse-Key)' })
      const verdict = await authenticate(this.#opts.keys, key, 'sql')
      if (verdict instanceof TracegateError) throw verdict
      const body = req.method === 'POST' ? (await readBody(req)).toString('utf8') : ''
      const fromUrl = url.searchParams.get('query')
      const query = fromUrl === null ? body : body === '' ? fromUrl : `${fromUrl}\n${body}`
      if (query.trim() === '') throw new TracegateError('invalid_parameter', { message: 'no query: send it as the query parameter or the POST body' })
      const params: Record<string, string> = {}
      let format = 'TabSeparated'
      let compress = false
      for (const [name, value] of url.searchParams) {
        if (name === 'query') continue
        if (name.startsWith('param_')) { params[name.slice('param_'.length)] = unescapeParam(value); continue }
        if (name === 'default_format') { format = value; continue }
        if (name === 'enable_http_compression') { compress = value === '1' || value === 'true'; continue }
        if ((name === 'compress' || name === 'decompress') && value !== '0' && value !== 'false') {
          throw new TracegateError('sql_not_allowed', { message: `ClickHouse's native compression (${name}=1) is not served here: turn it off in the driver, and use HTTP compression (enable_http_compression=1) instead` })
        }
        if (!HTTP_SETTINGS.has(name)) throw new TracegateError('sql_not_allowed', { message: `setting ${name} cannot be changed on the SQL port` })
      }
      const accountId = verdict.accountId
      const running = this.#running.get(accountId) ?? 0
      if (running >= this.#opts.config.perAccount) throw new TracegateError('sql_busy')
      this.#running.set(accountId, running + 1)
      let result
      try {
        const { maxExecutionSeconds, maxMemoryBytes, maxResultRows, maxResultBytes, maxThreads } = this.#opts.config
        result = await this.#opts.store.call('sqlQuery', {
          accountId, query, params, format, limits: { maxExecutionSeconds, maxMemoryBytes, maxResultRows, maxResultBytes, maxThreads }, connections: this.#opts.config.connections,
        })
      } catch (err) {
        const code = (err as { code?: unknown }).code
        if (code === 'sql_not_allowed' || code === 'sql_error') throw new TracegateError(code, { message: (err as Error).message })
        throw err
      } finally {
        const left = (this.#running.get(accountId) ?? 1) - 1
        if (left === 0) this.#running.delete(accountId)
        else this.#running.set(accountId, left)
      }
      let out: Buffer = Buffer.from(result.body.buffer, result.body.byteOffset, result.body.byteLength)
      const headers: Record<string, string> = { 'content-type': contentType(result.format), 'x-clickhouse-format': result.format }
      const accept = String(req.headers['accept-encoding'] ?? '')
      if (compress && out.length > 0) {
        if (/\bgzip\b/.test(accept)) { out = await gzipAsync(out); headers['content-encoding'] = 'gzip' }
        else if (/\bbr\b/.test(accept)) { out = await brotliAsync(out); headers['content-encoding'] = 'br' }
        else if (/\bdeflate\b/.test(accept)) { out = await deflateAsync(out); headers['content-encoding'] = 'deflate' }
      }
      headers['content-length'] = String(out.length)
      res.writeHead(200, headers).end(out)
      count('ok')
    } catch (err) {
      const code = err instanceof TracegateError ? err.code : null
      if (!counted) {
        count(code === 'sql_not_allowed' ? 'refused' : code === 'sql_busy' ? 'busy' : code !== null && ERRORS[code].status === 401 ? 'unauthorized' : 'error')
      }
      this.#fail(res, err)
    }
  }

  #fail (res: ServerResponse, err: unknown): void {
    if (res.headersSent) { res.destroy(); return }
    const e = err instanceof TracegateError ? err : new TracegateError('internal_error')
    let text: string
    if (e.code === 'sql_error') {
      // ClickHouse's own first line already reads `Code: N. DB::Exception: … (TYPE)`.
      text = /Code: \d+/.test(e.message) ? e.message.replace(/DB::Exception: /, 'DB::Exception: sql_error: ') : `Code: 36. DB::Exception: sql_error: ${e.message} (BAD_ARGUMENTS)`
    } else {
      const [n, name] = CH_CODES[e.code] ?? [1002, 'UNKNOWN_EXCEPTION']
      text = `Code: ${n}. DB::Exception: ${e.code}: ${e.message} (${name})`
    }
    const chCode = /Code: (\d+)/.exec(text)?.[1] ?? '1002'
    res.writeHead(e.status, {
      'content-type': 'text/plain; charset=UTF-8',
      'x-clickhouse-exception-code': chCode,
      'x-tracegate-error-code': e.code,
      ...(e.status === 401 ? { 'www-authenticate': 'Basic realm="tracegate sql"' } : {}),
    }).end(`${text}\n`)
  }
}
