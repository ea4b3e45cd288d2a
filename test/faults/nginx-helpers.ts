// Helpers for the tests that put something real in front of tracegate: Debian's nginx running the
// shipped deploy/nginx.conf (ports, paths and certificate rewritten) with a self-signed certificate, a
// second tracegate in a child process (chDB allows one data directory per process, so a file that needs
// two settings of TRACEGATE_TRUST_PROXY runs one of them there), HTTPS requests from a chosen loopback
// source address (Linux routes all of 127/8 to lo, so 127.0.0.2 is a second client as nginx sees it),
// and raw requests over TLS or TCP for what node's HTTP client will not send.
import { execFile, spawn } from 'node:child_process'
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request as httpsRequest, type Agent as HttpsAgent } from 'node:https'
import { connect as netConnect, type Socket } from 'node:net'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { repoFile } from '../../src/paths.js'
import { childEnv } from '../helpers/cli.js'
import { PROXY_LISTENING, ServeChild } from '../helpers/serve.js'
import type { Answer } from '../helpers/dashboard.js'
import { closedPort, tempDir } from '../helpers/server.js'
import { withTimeout } from '../helpers/wait.js'

export const NGINX = '/usr/sbin/nginx'
export const OPENSSL = '/usr/bin/openssl'
export const DEPLOY_CONF = fileURLToPath(repoFile('deploy/nginx.conf'))

interface Tap {
  teardown (fn: () => unknown): void
}

/** Missing nginx is a failure, not a skip: CI installs it (.ci/run), and the shipped config must be tested. */
export function requireNginx (): void {
  if (!existsSync(NGINX)) throw new Error(`${NGINX} is missing: install Debian's nginx (apt-get install nginx-light)`)
  if (!existsSync(OPENSSL)) throw new Error(`${OPENSSL} is missing: install Debian's openssl (apt-get install openssl)`)
}

export interface Certificate {
  readonly cert: string
  readonly key: string
  /** The certificate's PEM, for clients to trust. */
  readonly ca: string
}

/** A self-signed certificate for 127.0.0.1, made by openssl in `dir`. */
export async function selfSigned (dir: string): Promise<Certificate> {
  const cert = join(dir, 'cert.pem')
  const key = join(dir, 'key.pem')
  await promisify(execFile)(OPENSSL, ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
    '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
    '-keyout', key, '-out', cert])
  return { cert, key, ca: readFileSync(cert, 'utf8') }
}

export interface NginxPorts {
  /** tracegate's proxy and dashboard ports, the upstreams. */
  readonly upstreamProxy: number
  readonly upstreamDashboard: number
}

export interface Nginx {
  /** nginx's TLS port for the proxy API and for the dashboard. */
  readonly proxyPort: number
  readonly dashboardPort: number
  readonly ca: string
  readonly proxyUrl: string
  readonly dashboardUrl: string
  /** What nginx wrote to stderr so far (its error log). */
  readonly log: () => string
}

/**
 * deploy/nginx.conf with this run's ports, certificate and paths. Every replaced text must appear
 * exactly as often as expected, so the shipped file cannot drift away from what the test runs.
 */
export function renderConfig (template: string, dir: string, cert: Certificate, ports: NginxPorts & { proxyPort: number; dashboardPort: number }): string {
  const edits: Array<[from: string, to: string, count: number]> = [
    ['user www-data;', 'user root;', 1],
    ['pid /run/nginx-tracegate.pid;', `pid ${join(dir, 'nginx.pid')};`, 1],
    ['error_log /var/log/nginx/tracegate-error.log warn;', 'error_log stderr warn;', 1],
    ['access_log /var/log/nginx/tracegate-access.log;', `access_log ${join(dir, 'access.log')};\n` +
      ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((k) => `  ${k}_temp_path ${join(dir, k)};`).join('\n'), 1],
    ['/etc/ssl/tracegate/fullchain.pem', cert.cert, 1],
    ['/etc/ssl/tracegate/privkey.pem', cert.key, 1],
    ['server 127.0.0.1:8080;', `server 127.0.0.1:${ports.upstreamProxy};`, 1],
    ['server 127.0.0.1:8081;', `server 127.0.0.1:${ports.upstreamDashboard};`, 1],
    ['listen 443 ssl default_server;', `listen 127.0.0.1:${ports.proxyPort} ssl default_server;`, 1],
    ['listen 8443 ssl;', `listen 127.0.0.1:${ports.dashboardPort} ssl;`, 1],
  ]
  let text = template
  for (const [from, to, count] of edits) {
    const found = text.split(from).length - 1
    if (found !== count) throw new Error(`deploy/nginx.conf: expected ${count} × "${from}", found ${found}`)
    text = text.split(from).join(to)
  }
  return text
}

function connects (port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = netConnect({ port, host: '127.0.0.1' }, () => { s.destroy(); resolve(true) })
    s.on('error', () => { resolve(false) })
  })
}

/**
 * nginx in the foreground (its own process group, so its workers go with it) running deploy/nginx.conf
 * in front of the given tracegate ports; stopped at teardown.
 */
export async function startNginx (t: Tap, ports: NginxPorts): Promise<Nginx> {
  requireNginx()
  const dir = tempDir('tracegate-nginx-')
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const cert = await selfSigned(dir)
  const proxyPort = await closedPort()
  const dashboardPort = await closedPort()
  const conf = join(dir, 'nginx.conf')
  writeFileSync(conf, renderConfig(readFileSync(DEPLOY_CONF, 'utf8'), dir, cert, { ...ports, proxyPort, dashboardPort }))
  const child = spawn(NGINX, ['-p', dir, '-c', conf, '-e', 'stderr', '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'], detached: true })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (s: string) => { stderr += s })
  const exit = new Promise<void>((resolve) => { child.on('close', () => { resolve() }) })
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return
    // SIGTERM is nginx's fast shutdown: the master stops its workers and exits.
    process.kill(-child.pid, 'SIGTERM')
    await withTimeout(exit, 5_000, 'nginx did not stop').catch(() => { process.kill(-child.pid!, 'SIGKILL') })
  })
  const deadline = Date.now() + 10_000
  while (!(await connects(proxyPort) && await connects(dashboardPort))) {
    if (child.exitCode !== null) throw new Error(`nginx exited with ${child.exitCode}:\n${stderr}`)
    if (Date.now() > deadline) throw new Error(`nginx did not listen within 10 s:\n${stderr}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  return {
    proxyPort,
    dashboardPort,
    ca: cert.ca,
    proxyUrl: `https://127.0.0.1:${proxyPort}`,
    dashboardUrl: `https://127.0.0.1:${dashboardPort}`,
    log: () => stderr,
  }
}

export interface ChildTracegate {
  readonly proxyPort: number
  readonly dashboardPort: number
}

/** `tracegate serve --mock-providers` in a child process with these variables; stopped at teardown. */
export async function spawnTracegate (t: Tap, env: Record<string, string>): Promise<ChildTracegate> {
  const dataDir = tempDir('tracegate-child-')
  t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })
  const serve = new ServeChild(t, {
    env: childEnv({ TRACEGATE_DATA_DIR: dataDir, TRACEGATE_PROXY_PORT: '0', TRACEGATE_DASHBOARD_PORT: '0', TRACEGATE_LOG_LEVEL: 'warn', ...env }),
    teardown: 'term',
  })
  // serve tells where it listens on stderr (stdout is the JSON log).
  const proxy = await serve.waitFor(PROXY_LISTENING)
  const dashboard = await serve.waitFor(/dashboard on http:\/\/127\.0\.0\.1:(\d+)\n/)
  return { proxyPort: Number(proxy[1]), dashboardPort: Number(dashboard[1]) }
}

/** Status, headers, text and parsed JSON, as the dashboard tests' client answers. */
export type HttpsAnswer = Answer

export interface HttpsOptions {
  readonly method?: string
  readonly headers?: Record<string, string>
  readonly body?: string
  /** The loopback address the connection comes from (the client address nginx sees). */
  readonly from?: string
  /** Called with each body chunk and performance.now() as it arrives. */
  readonly onData?: (chunk: Buffer, at: number) => void
  /** The whole exchange's limit (default 15 s). */
  readonly ms?: number
  /** Reuse this agent's connections; by default every request has a fresh one. */
  readonly agent?: HttpsAgent
}

/** One HTTPS request that trusts `ca`. */
export function https (url: string, ca: string, o: HttpsOptions = {}): Promise<HttpsAnswer> {
  let destroy = (): void => {}
  const answer = new Promise<HttpsAnswer>((resolve, reject) => {
    const req = httpsRequest(url, {
      method: o.method ?? 'GET', headers: o.headers, ca, agent: o.agent ?? false, ...(o.from === undefined ? {} : { localAddress: o.from }),
    }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => { chunks.push(c); o.onData?.(c, performance.now()) })
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let json: any = null
        try { json = JSON.parse(text) } catch { /* not JSON */ }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json })
      })
      res.on('error', reject)
    })
    destroy = () => { req.destroy() }
    req.on('error', reject)
    req.end(o.body)
  })
  return withTimeout(answer, o.ms ?? 15_000, `no answer from ${url} in time`).finally(destroy)
}

export interface RawAnswer {
  readonly status: number
  /** Lower-case header names; the last value of a repeated header. */
  readonly headers: Record<string, string>
  readonly body: string
}

function parseRaw (bytes: Buffer): RawAnswer {
  const text = bytes.toString('utf8')
  const end = text.indexOf('\r\n\r\n')
  const head = (end < 0 ? text : text.slice(0, end)).split('\r\n')
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? '')?.[1] ?? 0)
  const headers: Record<string, string> = {}
  for (const line of head.slice(1)) {
    const i = line.indexOf(':')
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
  }
  return { status, headers, body: end < 0 ? '' : text.slice(end + 4) }
}

/**
 * Sends exact bytes and reads one answer: complete when its content-length is in, or when the server
 * closes (an HTTP/1.0 answer, a chunked body is left framed). The socket is never half-closed first:
 * nginx takes a client's end of input while it proxies as the client going away.
 */
function exchange (s: Socket, request: Buffer | string, ms: number): Promise<RawAnswer> {
  return withTimeout(new Promise<RawAnswer>((resolve, reject) => {
    let bytes = Buffer.alloc(0)
    const done = (): void => { s.destroy(); resolve(parseRaw(bytes)) }
    s.on('data', (c: Buffer) => {
      bytes = Buffer.concat([bytes, c])
      const end = bytes.indexOf('\r\n\r\n')
      if (end < 0) return
      const length = /\r\ncontent-length: *(\d+)/i.exec(bytes.subarray(0, end).toString('latin1'))?.[1]
      if (length !== undefined && bytes.length >= end + 4 + Number(length)) done()
    })
    s.on('end', done)
    s.on('error', reject)
    s.write(request)
  }), ms, 'no whole answer in time').finally(() => { s.destroy() })
}

/** Exact request bytes over TLS to nginx. */
export function rawTls (port: number, ca: string, request: Buffer | string, ms = 10_000): Promise<RawAnswer> {
  return exchange(tlsConnect({ port, host: '127.0.0.1', ca, servername: 'localhost', ALPNProtocols: ['http/1.1'] }), request, ms)
}

/** Exact bytes over plain TCP from a chosen loopback address. */
export function rawTcp (port: number, request: Buffer, from: string, ms = 15_000): Promise<RawAnswer> {
  return exchange(netConnect({ port, host: '127.0.0.1', localAddress: from }), request, ms)
}
