// A Responses API body may hand the provider credentials for a remote tool server (an MCP tool's or a
// connector's `authorization`, an MCP tool's `headers`). They are forwarded as sent, but the body the
// trace keeps has their values masked: a credential never reaches a trace.
import { Kind, type Member } from './scan.js'

const MASK = '[SECRET]'
// Cheap pre-checks on the raw `tools` value: a credential member, or a JSON escape that could spell one.
const AUTHORIZATION = Buffer.from('authorization')
const HEADERS = Buffer.from('headers')
const ESCAPE = Buffer.from('\\u')

/** The body with each tool's credentials masked, or null when it has none (the common case: nothing is parsed). */
export function maskToolCredentials (body: Buffer, members: readonly Member[]): Buffer | null {
  let tools: Member | undefined
  for (const m of members) if (m.name === 'tools' && m.kind === Kind.Array) tools = m
  if (tools === undefined) return null
  const raw = body.subarray(tools.valueStart, tools.end)
  if (raw.indexOf(AUTHORIZATION) === -1 && raw.indexOf(HEADERS) === -1 && raw.indexOf(ESCAPE) === -1) return null
  let list: unknown
  try { list = JSON.parse(raw.toString('utf8')) } catch { return null }
  if (!Array.isArray(list)) return null
  let masked = false
  for (const tool of list) {
    if (tool === null || typeof tool !== 'object' || Array.isArray(tool)) continue
    const t = tool as Record<string, unknown>
    if (typeof t.authorization === 'string') { t.authorization = MASK; masked = true }
    const headers = t.headers
    if (headers !== null && typeof headers === 'object' && !Array.isArray(headers)) {
      const h = headers as Record<string, unknown>
      for (const name in h) { h[name] = MASK; masked = true }
    }
  }
  if (!masked) return null
  return Buffer.concat([body.subarray(0, tools.valueStart), Buffer.from(JSON.stringify(list)), body.subarray(tools.end)])
}
