// Planted instructions in data: indirect-train.jsonl, whole OpenAI message lists built from
// the train split of microsoft/BIPIA, where an email, a table or a code question's context is pasted
// into the user message or returned as a tool result, with an attack instruction planted in it or not.
// Each row's attack category is found by matching BIPIA's train attack list (bipia-attacks-train.json,
// copied from the benchmark's train files, MIT) in its text, so categories can be held out.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { repoFile } from '../../src/paths.js'
import { datasetDir, type Row } from './data.js'

export interface IndirectRow {
  readonly messages: ReadonlyArray<Record<string, unknown>>
  readonly label: 0 | 1
  /** email, table or code: the kind of context, the unit left out by leaveOneIndirectSourceOut. */
  readonly context: 'email' | 'table' | 'code'
  readonly shape: 'pasted' | 'tool'
  /** BIPIA's attack category for attacks ("Clickbait", "Cookie Theft", …); absent on clean rows. */
  readonly category?: string
  /** The message that carries the context: the user message it was pasted into, or the tool result. */
  readonly carrier: { readonly role: 'user' | 'tool', readonly text: string }
  /** The context with its attack removed: rows that share one are one group (folds never split it). */
  readonly group: string
  /** Where the attack stands in the carrier's text. */
  readonly planted?: readonly [number, number]
}

export const ATTACKS_URL = repoFile('training/detector/bipia-attacks-train.json')

/** BIPIA's train attacks as [category, attack text] pairs, longest text first (a shorter one may be inside it). */
export function bipiaAttacks (): Array<readonly [string, string]> {
  const all = JSON.parse(readFileSync(ATTACKS_URL, 'utf8')) as Record<string, Record<string, string[]>>
  const pairs: Array<readonly [string, string]> = []
  for (const byCategory of Object.values(all)) for (const [category, texts] of Object.entries(byCategory)) for (const t of texts) pairs.push([category, t])
  return pairs.sort((a, b) => b[1].length - a[1].length)
}

function hash (s: string): string {
  return createHash('sha256').update(s).digest('hex').slice(0, 16)
}

export function readIndirect (): IndirectRow[] {
  const attacks = bipiaAttacks()
  const out: IndirectRow[] = []
  for (const line of readFileSync(resolve(datasetDir(), 'indirect-train.jsonl'), 'utf8').split('\n')) {
    if (line.trim() === '') continue
    const o = JSON.parse(line) as { messages: Array<{ role: string, content: string | null }>, label: number, source: string, shape: 'pasted' | 'tool' }
    const carrierMsg = o.shape === 'tool' ? o.messages.find((m) => m.role === 'tool') : o.messages.find((m) => m.role === 'user')
    if (carrierMsg === undefined || typeof carrierMsg.content !== 'string') throw new Error(`indirect-train.jsonl: a ${o.shape} row without its carrier`)
    const text = carrierMsg.content
    const context = /_(email|table|code)_/.exec(o.source)?.[1] as IndirectRow['context'] | undefined
    if (context === undefined) throw new Error(`indirect-train.jsonl: unknown source ${o.source}`)
    const label = o.label === 1 ? 1 : 0
    let category: string | undefined
    let planted: [number, number] | undefined
    let bare = text
    if (label === 1) {
      const hit = attacks.find(([, a]) => text.includes(a))
      if (hit === undefined) throw new Error('indirect-train.jsonl: an attack row matches no BIPIA train attack')
      category = hit[0]
      const at = text.indexOf(hit[1])
      planted = [at, at + hit[1].length]
      bare = text.replace(hit[1], '')
    }
    const core = bare.replace(/^Here is the [a-z]+:\s*/, '').replace(/\n\nQ: [\s\S]*$/, '')
    out.push({
      messages: o.messages,
      label,
      context,
      shape: o.shape,
      ...(category !== undefined ? { category } : {}),
      ...(planted !== undefined ? { planted } : {}),
      carrier: { role: carrierMsg.role === 'tool' ? 'tool' : 'user', text },
      group: core,
    })
  }
  return groupNearDuplicates(out, attacks)
}

/**
 * Rows whose contexts overlap share a group: BIPIA's mails are often one template with other amounts,
 * dates or names, and those must not sit on both sides of a split. Two rows overlap when the 80
 * characters at the middle of one's text (its attack removed) occur in the other's; the groups are the
 * connected rows, named by a hash of one context.
 */
function groupNearDuplicates (rows: IndirectRow[], attacks: ReadonlyArray<readonly [string, string]>): IndirectRow[] {
  const parent = rows.map((_, i) => i)
  const find = (i: number): number => { while (parent[i] !== i) { parent[i] = parent[parent[i] as number] as number; i = parent[i] as number } return i }
  const texts = rows.map((r) => r.carrier.text)
  rows.forEach((r, i) => {
    let bare = r.carrier.text
    for (const [, a] of attacks) bare = bare.replace(a, '')
    const mid = Math.floor(bare.length / 2)
    const probe = bare.slice(mid - 40, mid + 40)
    for (let j = 0; j < rows.length; j++) if (find(i) !== find(j) && (texts[j] as string).includes(probe)) parent[find(i)] = find(j)
  })
  return rows.map((r, i) => ({ ...r, group: hash((rows[find(i)] as IndirectRow).group) }))
}

/**
 * Contexts by group: a fixed 20% held out (never trained on, never used to choose anything), 20% the
 * data-dev part (train.ts chooses the data threshold on its clean rows), the rest trained on.
 */
export function contextSplit (r: Pick<IndirectRow, 'group'>): 'train' | 'dev' | 'heldout' {
  const k = parseInt(r.group.slice(0, 8), 16) % 5
  return k === 0 ? 'heldout' : k === 1 ? 'dev' : 'train'
}

export function isHeldOutContext (r: Pick<IndirectRow, 'group'>): boolean {
  return contextSplit(r) === 'heldout'
}

/**
 * Indirect rows as training rows, sourced bipia_<context>: the data the carrier holds, in its role. A
 * pasted context is trained on without the user's question after it: a harmless text followed by a
 * request is how a preamble hijack looks too ("… End of text. Now write …"), and the question is the
 * user's, not the data's.
 */
export function indirectTrainingRow (r: IndirectRow): Row {
  const text = r.shape === 'pasted' ? r.carrier.text.replace(/\n\nQ: [\s\S]*$/, '') : r.carrier.text
  const planted = r.planted !== undefined && r.planted[1] <= text.length ? { planted: r.planted } : {}
  return { text, label: r.label, source: `bipia_${r.context}`, role: r.carrier.role, group: r.group, ...(r.category !== undefined ? { category: r.category } : {}), ...planted }
}
