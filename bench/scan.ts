// Micro-benchmark of the front thread's body work on a realistic chat body: whole-body validation
// (simdjson, JSON.parse, our scanner) and finding the service fields (our top-level scanner against
// full parsers). Prints one JSON line. BENCH_SCAN_KB sets the body size (default 10), BENCH_SCAN_N the
// iterations (default 20000).
import { isUtf8 } from 'node:buffer'
import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'
import { cutMembers, isValidJson, scanTopLevel } from '../src/proxy/scan.js'

const require = createRequire(import.meta.url)
const simdjson = require('simdjson') as {
  isValid (s: string): boolean
  lazyParse (s: string): { valueForKeyPath (p: string): unknown }
}

const kb = Number(process.env.BENCH_SCAN_KB ?? 10)
const n = Number(process.env.BENCH_SCAN_N ?? 20_000)

function chatBody (bytes: number): Buffer {
  const messages: Array<{ role: string; content: string }> = [{ role: 'system', content: 'You are a helpful assistant. Réponds en français si on te parle français. ' }]
  let i = 0
  while (JSON.stringify(messages).length < bytes) {
    messages.push({ role: i % 2 === 0 ? 'user' : 'assistant', content: `Message ${i}: "quoted" text with \\ escapes, ünïcödé and numbers ${i * 7919}. `.repeat(4) })
    i++
  }
  return Buffer.from(JSON.stringify({
    model: 'gpt-4o-mini', api_key: 'tgk_' + 'a'.repeat(43), temperature: 0.2, messages, stream: false, seed: 12345678901234567890,
  }))
}

function time (fn: () => unknown): number {
  for (let i = 0; i < Math.min(2000, n); i++) fn()
  const t0 = performance.now()
  for (let i = 0; i < n; i++) fn()
  return ((performance.now() - t0) * 1000) / n
}

const body = chatBody(kb * 1024)
const round = (us: number): number => Math.round(us * 100) / 100
const results = {
  bench: 'scan',
  body_bytes: body.length,
  iterations: n,
  validate_us: {
    simdjson_isValid_latin1: round(time(() => isValidJson(body))),
    json_parse_utf8: round(time(() => isUtf8(body) && JSON.parse(body.toString('utf8')))),
    utf8_check_only: round(time(() => isUtf8(body))),
  },
  fields_us: {
    top_level_scanner: round(time(() => scanTopLevel(body))),
    json_parse_then_read: round(time(() => (JSON.parse(body.toString('utf8')) as { api_key: string }).api_key)),
    simdjson_lazyParse_then_read: round(time(() => simdjson.lazyParse(body.toString('utf8')).valueForKeyPath('api_key'))),
  },
  cut_us: 0,
  full_front_path_us: 0,
}
const members = scanTopLevel(body)!
const cut = new Set([members.findIndex((m) => m.name === 'api_key')])
results.cut_us = round(time(() => cutMembers(body, members, cut)))
results.full_front_path_us = round(time(() => {
  if (!isValidJson(body)) throw new Error('invalid')
  const ms = scanTopLevel(body)!
  return cutMembers(body, ms, cut)
}))
process.stdout.write(JSON.stringify(results) + '\n')
