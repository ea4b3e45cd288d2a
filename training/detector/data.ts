// The rows the detector is trained and measured on: the shared data set (train.jsonl, dev.jsonl) and
// this project's own rows, hand-written (the .jsonl files here) and generated (generate.ts). Own rows
// come in a train part and a held-out part; the held-out part is never trained on and never used to
// choose a setting.
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ROOT, repoFile } from '../../src/paths.js'
import { DATA_STRIDE, DATA_WINDOW } from '../../workers/detector/model.js'
import { pastedRanges } from '../../workers/detector/spans.js'
import { documentSplit, documents } from './documents.js'
import { generate, type Role } from './generate.js'
import { generatedQuestions } from './gen-questions.js'
import { contextSplit, indirectTrainingRow, readIndirect } from './indirect.js'
import { rng } from './rng.js'

export interface Row {
  readonly text: string
  readonly label: 0 | 1
  readonly source: string
  /** The segment role the text arrives in (user when absent). */
  readonly role?: Role | 'developer'
  /** Generated rows name their template; they are weighted per template, not per row (train.ts). */
  readonly template?: string
  /** Benign own rows name their topic, for the held-out report. */
  readonly topic?: string
  /** Rows of one document or context share a group: a split never puts a group on both sides. */
  readonly group?: string
  /** Planted instructions: BIPIA's attack category (indirect.ts). */
  readonly category?: string
  /** Planted instructions: where the attack stands in `text`. */
  readonly planted?: readonly [number, number]
  /** The row's weight in the loss, when its set fixes one (train.ts weightsOf); else by source and kind. */
  readonly weight?: number
}

/** The data set folder: TRACEGATE_DATASET_DIR, else ../shared/datasets/injection next to the repository. */
export function datasetDir (): string {
  const root = fileURLToPath(ROOT)
  return process.env.TRACEGATE_DATASET_DIR ?? resolve(root, '../shared/datasets/injection')
}

function readJsonl (path: string | URL): Row[] {
  const rows: Row[] = []
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (line.trim() === '') continue
    const o = JSON.parse(line) as { text: string, label: number, source: string, role?: Role }
    rows.push({ text: o.text, label: o.label === 1 ? 1 : 0, source: o.source, ...(o.role !== undefined ? { role: o.role } : {}) })
  }
  return rows
}

export function readRows (file: 'train.jsonl' | 'dev.jsonl'): Row[] {
  return readJsonl(resolve(datasetDir(), file))
}

/**
 * Hand-written benign prompts that use the data set's trigger words in ordinary ways (passwords and
 * secrets asked about, system prompts, "ignore" and "instructions" in everyday requests, role-play,
 * questions about jailbreaks). Written for this project, never copied from dev.jsonl.
 */
export const HARD_NEGATIVES_URL = repoFile('training/detector/hard-negatives.jsonl')
/** Hand-written attacks in styles the data set lacks; holdout.jsonl and probes.jsonl hold different prompts. */
export const HARD_POSITIVES_URL = repoFile('training/detector/hard-positives.jsonl')

/** Sources this project wrote (hand-written or generated); every other source is the data set's. */
export const OWN_SOURCES: ReadonlySet<string> = new Set(['hard_negatives', 'hard_positives', 'overdefense', 'secret_extraction', 'preamble_hijack', 'indirect', 'persona'])
/** The attack styles of the over-defense work, one source each (generated and hand-written rows). */
export const OWN_ATTACK_SOURCES = ['secret_extraction', 'preamble_hijack', 'indirect', 'persona'] as const

/** This project's over-defense and attack rows of one part: the hand-written file and the generated rows. */
export function ownRows (part: 'train' | 'heldout'): Row[] {
  const rows = [
    ...readJsonl(repoFile(`training/detector/overdefense-${part}.jsonl`)),
    ...readJsonl(repoFile(`training/detector/attacks-${part}.jsonl`)),
  ]
  for (const g of generate()) {
    if (g.split !== part) continue
    rows.push({ text: g.text, label: g.label, source: g.source, role: g.role, template: g.template, ...(g.label === 0 ? { topic: g.topic } : {}) })
  }
  return rows
}

/**
 * Planted instructions and clean contexts (indirect.ts) and clean documents (documents.ts) of one part:
 * `train` is fitted on, `dev` chooses the data threshold, `heldout` is only measured.
 */
export function dataRows (part: 'train' | 'dev' | 'heldout' = 'train'): Row[] {
  return [
    ...readIndirect().filter((r) => contextSplit(r) === part).map(indirectTrainingRow),
    ...documents().filter((r) => documentSplit(r) === part),
  ]
}

/** The most windows of one text `windowRows` gives with `every`. */
const EVERY_WINDOWS = 8

/**
 * Data is also scored as the best of its small windows (model.ts DATA_WINDOW), so the model is fitted on
 * windows: one window of every benign row longer than a window (with `every`, the windows it is read in,
 * at the reading stride, at most EVERY_WINDOWS spread over it), and the window of every planted
 * instruction that holds it (placed at random around it), each a row of its own with its parent's
 * source, group and category. A long attack of the data set is not cut: its other windows may hold
 * nothing of the attack.
 */
export function windowRows (rows: readonly Row[], seed = 22, every = false): Row[] {
  const next = rng(seed)
  const out: Row[] = []
  for (const r of rows) {
    if (r.text.length <= DATA_WINDOW) continue
    const { template: _, ...rest } = r
    if (r.label === 0 && every) {
      const last = Math.ceil((r.text.length - DATA_WINDOW) / DATA_STRIDE)
      const n = Math.min(last + 1, EVERY_WINDOWS)
      for (let k = 0; k < n; k++) {
        const at = Math.min(r.text.length - DATA_WINDOW, Math.round(k * last / Math.max(1, n - 1)) * DATA_STRIDE)
        out.push({ ...rest, text: r.text.slice(at, at + DATA_WINDOW) })
      }
    } else if (r.label === 0) {
      const at = Math.floor(next() * (r.text.length - DATA_WINDOW))
      out.push({ ...rest, text: r.text.slice(at, at + DATA_WINDOW) })
    } else if (r.planted !== undefined) {
      const [s, e] = r.planted
      const lo = Math.max(0, e - DATA_WINDOW), hi = Math.min(s, r.text.length - DATA_WINDOW)
      if (hi < lo) continue
      const at = lo + Math.floor(next() * (hi - lo + 1))
      out.push({ ...rest, text: r.text.slice(at, at + DATA_WINDOW) })
    }
  }
  return out
}

/**
 * The sources of questionRows. The linear part (the user's reading) is fitted on them, the head (the
 * data reading) is not: a request to extract or record is the user's own in the user's message, and a
 * task that departs from the user's in data.
 */
export const QUESTION_SOURCES: ReadonlySet<string> = new Set(['bipia_question', 'context_question'])

/** The weight of each user question about a context (questionRows): many rows of a few phrasings. */
export const QUESTION_WEIGHT = 0.5

/**
 * What users ask about a text they pasted or a tool returned, as benign user rows: the questions of
 * the trained mail contexts of indirect-train.jsonl (BIPIA's train split; the held-out and data-dev
 * contexts' questions are left out) and generated ones (gen-questions.ts). Without them the user model
 * read "Q: Find the $ value paid to … If multiple, record all $ values paid." as an order.
 */
export function questionRows (): Row[] {
  const seen = new Set<string>()
  for (const r of readIndirect()) {
    // A tool-shaped row's user message is the question alone; a pasted one holds the context too.
    // Only the mail questions: their extraction wording ("record all $ values paid") is what the user
    // model lacked; the table questions are ordinary questions about facts, which the benign sources
    // hold by the thousand, and with them the threshold fell and blocked more of the own benign prompts.
    if (contextSplit(r) !== 'train' || r.shape !== 'tool' || r.context !== 'email') continue
    const user = r.messages.find((m) => m.role === 'user')?.content
    if (typeof user === 'string') seen.add(user)
  }
  const rows: Row[] = [...seen].map((text) => ({ text, label: 0, source: 'bipia_question', role: 'user', weight: QUESTION_WEIGHT }))
  for (const g of generatedQuestions()) rows.push({ text: g.text, label: 0, source: 'context_question', role: 'user', weight: QUESTION_WEIGHT })
  return rows
}

/**
 * What the linear part is fitted on: train.jsonl, the hard negatives and positives, the own train part,
 * and the users' questions about contexts.
 */
export function trainingRows (): Row[] {
  return [...readRows('train.jsonl'), ...readJsonl(HARD_NEGATIVES_URL), ...readJsonl(HARD_POSITIVES_URL), ...ownRows('train'), ...questionRows()]
}

/**
 * The text benign users pasted after a framing line (spans.ts), each a clean data row with its parent's
 * source (a generated row's text counts as one own row, not as a share of its template): the data
 * reading judges that text alone (a news article, a prompt's front matter), so the head is fitted on it
 * as it will read it.
 */
export function pastedRows (rows: readonly Row[]): Row[] {
  const out: Row[] = []
  for (const r of rows) {
    if (r.label !== 0 || (r.role ?? 'user') !== 'user') continue
    const { template: _, ...rest } = r
    for (const [s, e] of pastedRanges(r.text)) out.push({ ...rest, text: r.text.slice(s, e) })
  }
  return out
}

/**
 * What the neural head is fitted on besides trainingRows(): the train parts of the planted
 * instructions and the clean documents, the text the benign training rows paste (pastedRows), and
 * windows of every long row of these (up to EVERY_WINDOWS of the windows a pasted text is read in).
 */
export function headTrainingRows (): Row[] {
  const data = dataRows()
  const pasted = pastedRows(trainingRows())
  return [...data, ...pasted, ...windowRows([...trainingRows(), ...data]), ...windowRows(pasted, 23, true)]
}