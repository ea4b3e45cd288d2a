// The empty trace list of an account that has no traces yet: a first call to paste into a shell, built
// from this server's own proxy address, with the header names a client sends. The keys in it are shell
// variables the reader sets: no key value is ever put in the page.
import { get } from './api.js'
import { copyButton } from './clipboard.js'
import { h, replace } from './dom.js'
import type { Session } from './types.js'

/** GET /api/ui/proxy: the proxy's host and port, and the providers the server holds a key for. */
interface ProxyFacts { host: string, port: number, server_keys: string[] }

const WILDCARD = new Set(['0.0.0.0', '::', '[::]', ''])

/**
 * The proxy's own listening address (tracegate speaks plain HTTP; TLS is a reverse proxy's): a wildcard
 * listener is reached at the host the dashboard was reached at.
 */
export function proxyUrl (p: ProxyFacts): string {
  const host = WILDCARD.has(p.host) ? location.hostname : p.host
  const shown = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host
  return `http://${shown}:${p.port}`
}

/** The command: OpenAI's wire format on the native route, the tracegate key as the SDK's bearer key. */
export function firstCallCommand (url: string, providerKey: boolean): string {
  const lines = [
    '# A proxy key from Settings → API Keys (its value is shown once, when it is created)',
    "export TRACEGATE_KEY='tgk_…'",
  ]
  if (providerKey) lines.push('# Your OpenAI key (the provider key; tracegate never stores it)', "export OPENAI_API_KEY='sk-…'")
  lines.push(
    `curl -sS ${url}/v1/chat/completions \\`,
    '  -H "Authorization: Bearer $TRACEGATE_KEY" \\',
    ...(providerKey ? ['  -H "x-tracegate-provider-key: $OPENAI_API_KEY" \\'] : []),
    "  -H 'Content-Type: application/json' \\",
    `  -d '{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello from tracegate"}]}'`)
  return lines.join('\n')
}

/** The card; filled once the proxy's address is known. */
export function firstCallCard (session: Session): HTMLElement {
  const card = h('section', { class: 'card first-call', 'data-testid': 'first-call' },
    h('h2', null, 'No traces yet: send your first call'), h('p', { class: 'muted' }, 'Loading…'))
  get<ProxyFacts>('/api/ui/proxy').then((p) => {
    // The server's key for alpha is used only when this account allows server-side keys.
    const own = !(session.account.server_side_keys && p.server_keys.includes('alpha'))
    const command = firstCallCommand(proxyUrl(p), own)
    const pre = h('pre', { class: 'command', 'data-testid': 'first-call-command' }, command)
    replace(card,
      h('div', { class: 'card-head' }, h('h2', null, 'No traces yet: send your first call'),
        copyButton(() => command, pre, { 'data-testid': 'first-call-copy' })),
      h('p', null, 'Set the key', own ? 's' : '', ' in the first lines (a proxy key comes from ', h('a', { href: '/settings/keys' }, 'API Keys'),
        '), then run it in a shell. The call appears here within a second, with its prompt, answer, tokens, cost and latency.'),
      pre,
      h('p', { class: 'muted' }, 'SDKs need only a new base URL: OpenAI\'s ', h('code', null, `${proxyUrl(p)}/v1`),
        ', Anthropic\'s and Gemini\'s ', h('code', null, proxyUrl(p)), ', with the tracegate key as their API key.'))
  }).catch((e: unknown) => {
    replace(card, h('h2', null, 'No traces yet'),
      h('p', { class: 'error' }, `Could not load the proxy's address: ${e instanceof Error ? e.message : String(e)}`))
  })
  return card
}
