// Model fallbacks (TRACEGATE_ROUTES): a routes file maps a provider's model to an ordered list of
// (target, model) pairs of the same wire format, tried as a provider's targets are (fallover.ts): the next
// pair takes the call when one fails before answering. An account can be denied fallbacks to another
// model: its calls then keep the pairs of the model they asked for. Parsed and checked at start; an error
// names the file's line.

/** One step of a route: a target (a base URL) and the model asked of it. */
export interface RoutePair {
  readonly baseUrl: string
  readonly model: string
}

/** `P`: the providers' names (config.ts: alpha, beta, gamma); this module stays a leaf. */
export interface ModelRoutes<P extends string = string> {
  /** Per provider, the pairs a model's calls go through, in order (`*` already expanded). */
  readonly routes: Readonly<Record<P, ReadonlyMap<string, readonly RoutePair[]>>>
  /** Accounts denied fallbacks to another model; `all`: every account but those in `allowed`. */
  readonly denyAll: boolean
  readonly denied: ReadonlySet<string>
  readonly allowed: ReadonlySet<string>
}

/** An error in the routes file, naming its line (1-based). */
export class RoutesError extends Error {
  constructor (readonly line: number, message: string) {
    super(`line ${line}: ${message}`)
    this.name = 'RoutesError'
  }
}

/** The most pairs one model's route may hold once `*` is expanded, as for a provider's own targets. */
export const MAX_PAIRS = 16
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const MODEL = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$/

/**
 * The file's text, line by line:
 *   `<provider> <model> -> <target> <model>, <target> <model>, …`  a route (`*` as a target: each of the
 *   provider's TRACEGATE_<NAME>_BASE_URL targets, in order);
 *   `fallbacks deny <account id>|*` and `fallbacks allow <account id>`: who may fall back to another model;
 *   blank lines and `#` comments.
 * `targets`: each provider's configured base URLs; `validModel`: a provider's own model rule, if it has one.
 */
export function parseRoutes<P extends string> (text: string, targets: Readonly<Record<P, readonly string[]>>, validModel: (provider: P, model: string) => boolean): ModelRoutes<P> {
  const providers = Object.keys(targets) as P[]
  const routes = Object.fromEntries(providers.map((p) => [p, new Map<string, RoutePair[]>()])) as Record<P, Map<string, RoutePair[]>>
  const denied = new Set<string>()
  const allowed = new Set<string>()
  let denyAll = false
  const lines = text.split(/\r?\n/)
  lines.forEach((raw, i) => {
    const n = i + 1
    const line = raw.replace(/#.*$/, '').trim()
    if (line === '') return
    const words = line.split(/\s+/)
    if (words[0] === 'fallbacks') {
      const [, verb, who] = words
      if (words.length !== 3 || (verb !== 'allow' && verb !== 'deny')) throw new RoutesError(n, 'a fallbacks line is `fallbacks allow <account id>` or `fallbacks deny <account id>|*`')
      if (who === '*') {
        if (verb === 'allow') throw new RoutesError(n, 'every account is allowed fallbacks unless denied: `fallbacks allow *` says nothing')
        denyAll = true
        return
      }
      if (!UUID.test(who!)) throw new RoutesError(n, `${JSON.stringify(who)} is not an account id`)
      const id = who!.toLowerCase()
      if ((verb === 'allow' ? denied : allowed).has(id)) throw new RoutesError(n, `account ${id} is both allowed and denied fallbacks`)
      ;(verb === 'allow' ? allowed : denied).add(id)
      return
    }
    const arrow = line.indexOf('->')
    if (arrow < 0) throw new RoutesError(n, 'a route is `<provider> <model> -> <target> <model>, …` (or a fallbacks line)')
    const head = line.slice(0, arrow).trim().split(/\s+/)
    if (head.length !== 2) throw new RoutesError(n, 'a route starts with a provider and a model: `alpha gpt-4o -> …`')
    const provider = head[0] as P
    const model = head[1]!
    if (!providers.includes(provider)) throw new RoutesError(n, `unknown provider ${JSON.stringify(head[0])} (${providers.join(', ')})`)
    checkModel(n, provider, model, validModel)
    if (routes[provider].has(model)) throw new RoutesError(n, `${provider} ${model} has a route already`)
    const pairs: RoutePair[] = []
    for (const part of line.slice(arrow + 2).split(',')) {
      const pair = part.trim().split(/\s+/)
      if (pair.length !== 2 || pair[0] === '') throw new RoutesError(n, `each step is a target and a model (\`* gpt-4o\`, \`https://eu.example.net/openai gpt-4o\`), got ${JSON.stringify(part.trim())}`)
      const [target, to] = pair as [string, string]
      checkModel(n, provider, to, validModel)
      for (const baseUrl of target === '*' ? targets[provider] : [baseUrlOf(n, target)]) pairs.push({ baseUrl, model: to })
    }
    if (pairs.length > MAX_PAIRS) throw new RoutesError(n, `a route may hold at most ${MAX_PAIRS} steps once * is expanded, this one holds ${pairs.length}`)
    routes[provider].set(model, pairs)
  })
  return { routes, denyAll, denied, allowed }
}

function checkModel<P extends string> (line: number, provider: P, model: string, validModel: (provider: P, model: string) => boolean): void {
  if (!MODEL.test(model) || !validModel(provider, model)) throw new RoutesError(line, `${JSON.stringify(model)} is not a valid ${provider} model name`)
}

/** A step's target: an absolute http(s) base URL without credentials, as TRACEGATE_<NAME>_BASE_URL takes it. */
function baseUrlOf (line: number, raw: string): string {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new RoutesError(line, `${JSON.stringify(raw)} is not * or an absolute http(s) URL`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new RoutesError(line, `${JSON.stringify(raw)} must use http or https`)
  if (url.username !== '' || url.password !== '') throw new RoutesError(line, 'a target must not carry credentials')
  return url.origin + url.pathname.replace(/\/+$/, '')
}

/** Whether an account's calls may fall back to another model than the one they asked for. */
export function fallbacksAllowed (r: ModelRoutes<string>, accountId: string): boolean {
  if (r.allowed.has(accountId)) return true
  return !r.denyAll && !r.denied.has(accountId)
}
