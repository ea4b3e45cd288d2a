// Generated over-defense and attack prompts: templates with slots (gen-benign.ts, gen-attacks.ts,
// gen-shared.ts) expanded with a seeded PRNG, so the same seed gives the same rows byte for byte.
// `node dist-training/training/detector/generate.js [seed] > rows.jsonl` prints them for reading.
//
// The split is by template, never by row: within each topic, every third template (the 3rd, 6th, …)
// is held out, so the held-out rows are phrasings the model never saw in training, not new fillings of
// phrasings it did. No held-out text is also a training text.
import { pathToFileURL } from 'node:url'
import { ATTACK_SLOTS, ATTACK_TEMPLATES } from './gen-attacks.js'
import { BENIGN_SLOTS, BENIGN_TEMPLATES } from './gen-benign.js'
import { SHARED } from './gen-shared.js'
import { rng } from './rng.js'

export type Role = 'user' | 'system' | 'tool'

export interface Template {
  /** Stable and unique: it names the template in reports and seeds its own stream of choices. */
  readonly id: string
  /** Benign topic or attack style; the held-out split is taken within each topic. */
  readonly topic: string
  readonly label: 0 | 1
  /** Attack templates name their source (one per attack style); benign ones are all `overdefense`. */
  readonly source?: string
  readonly role?: Role
  /** `[[slot]]` picks a value of that slot (values may hold slots), `[[a|b|c]]` one of the choices. */
  readonly text: string
  /** Rows to draw (distinct texts; fewer when the template cannot make that many). */
  readonly n?: number
}

export interface GeneratedRow {
  readonly text: string
  readonly label: 0 | 1
  readonly source: string
  readonly role: Role
  readonly topic: string
  readonly template: string
  readonly split: 'train' | 'heldout'
}

export const DEFAULT_SEED = 20261124
const DEFAULT_N = 12

/** FNV-1a of the template id mixed with the seed: each template draws from its own stream. */
function seedOf (id: string, seed: number): number {
  let h = 0x811c9dc5 ^ seed
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 16777619)
  return h >>> 0
}

const SLOT = /\[\[([^[\]]*)\]\]/

/** One expansion of `text`: innermost `[[…]]` first, until none is left. */
export function expand (text: string, slots: Readonly<Record<string, readonly string[]>>, next: () => number): string {
  let out = text
  for (let guard = 0; guard < 10_000; guard++) {
    const m = SLOT.exec(out)
    if (m === null) return out.replace(/ {2,}/g, ' ').replace(/ ([,.?!])/g, '$1').trim()
    const inner = m[1] as string
    const choices = inner.includes('|') ? inner.split('|') : slots[inner]
    if (choices === undefined || choices.length === 0) throw new Error(`generate: unknown slot [[${inner}]]`)
    const pick = choices[Math.floor(next() * choices.length)] as string
    out = out.slice(0, m.index) + pick + out.slice(m.index + m[0].length)
  }
  throw new Error(`generate: slots nest too deep in ${JSON.stringify(text.slice(0, 60))}`)
}

function rowsOf (templates: readonly Template[], slots: Readonly<Record<string, readonly string[]>>, seed: number): GeneratedRow[] {
  const ids = new Set<string>()
  const indexInTopic = new Map<string, number>()
  const out: GeneratedRow[] = []
  for (const t of templates) {
    if (ids.has(t.id)) throw new Error(`generate: duplicate template id ${t.id}`)
    ids.add(t.id)
    const k = indexInTopic.get(t.topic) ?? 0
    indexInTopic.set(t.topic, k + 1)
    const split = k % 3 === 2 ? 'heldout' : 'train'
    const next = rng(seedOf(t.id, seed))
    const want = t.n ?? DEFAULT_N
    const texts = new Set<string>()
    for (let tries = 0; texts.size < want && tries < want * 8; tries++) texts.add(expand(t.text, slots, next))
    for (const text of texts) {
      out.push({ text, label: t.label, source: t.source ?? 'overdefense', role: t.role ?? 'user', topic: t.topic, template: t.id, split })
    }
  }
  return out
}

/** Every generated row, benign then attacks, in template order. */
export function generate (seed = DEFAULT_SEED): GeneratedRow[] {
  const rows = [
    ...rowsOf(BENIGN_TEMPLATES, { ...SHARED, ...BENIGN_SLOTS }, seed),
    ...rowsOf(ATTACK_TEMPLATES, { ...SHARED, ...ATTACK_SLOTS }, seed),
  ]
  // A text drawn by a training template and a held-out one stays in training only.
  const trained = new Set(rows.filter((r) => r.split === 'train').map((r) => r.text))
  return rows.filter((r) => r.split === 'train' || !trained.has(r.text))
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const seed = process.argv[2] !== undefined ? Number(process.argv[2]) : DEFAULT_SEED
  for (const r of generate(seed)) process.stdout.write(JSON.stringify(r) + '\n')
}
