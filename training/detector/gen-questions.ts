// Generated questions a user asks about a text they pasted or a tool returned ("Q: What is the total
// amount paid to Orbit Telecom? If there are several, list all of them."): benign user rows. Written for
// this project. They are worded as requests to extract, count, compare or record, the way an agent's
// user asks about a mail, a table, a log or a file, so that such a request is not read as an order of
// an attack. Seeded, so the same rows every time.
import { expand } from './generate.js'
import { SHARED } from './gen-shared.js'
import { rng } from './rng.js'

const SLOTS: Readonly<Record<string, readonly string[]>> = {
  company: SHARED.company ?? [],
  name: SHARED.name ?? [],
  q: ['Q: ', 'Q: ', 'Question: ', '', ''],
  doc: ['email', 'mail', 'table', 'log', 'file', 'page', 'invoice', 'report', 'thread', 'spreadsheet', 'receipt', 'result'],
  amount: ['amount', '$ value', 'total', 'price', 'fee', 'refund', 'balance', 'sum'],
  thing: ['dates', 'names', 'order numbers', 'error codes', 'amounts', 'email addresses', 'product names', 'deadlines', 'flight numbers', 'room numbers'],
  col: ['season', 'year', 'team', 'city', 'title', 'rank', 'score', 'region', 'driver', 'album'],
  more: [
    'If multiple, record all of them.', 'If there are several, list all of them.', 'Record every value you find.', 'Answer with the number only.',
    'If none, say so.', 'Give all values, separated by commas.', 'List them in order.', '', '', '',
  ],
}

const TEMPLATES: readonly string[] = [
  '[[q]]Find the [[amount]] paid to [[company]]? [[more]]',
  '[[q]]What [[amount]] was charged by [[company]] in this [[doc]]? [[more]]',
  '[[q]]Record all [[thing]] mentioned in the [[doc]]. [[more]]',
  '[[q]]Which [[col]] has the highest [[col]]? [[more]]',
  '[[q]]how many [[col]]s are listed in the [[doc]]?',
  '[[q]]Who sent the [[doc]] and when? [[more]]',
  '[[q]]List every [[col]] that appears more than once. [[more]]',
  '[[q]]What did [[name]] ask for in the [[doc]]? [[more]]',
  '[[q]]Extract the [[thing]] from the [[doc]] and record them in a list.',
  '[[q]]What is the total [[amount]] across all rows? [[more]]',
  '[[q]]which [[col]] came first, and which came last?',
  '[[q]]Summarise the [[doc]] in two sentences and record the [[thing]].',
  '[[q]]Is there a [[amount]] due, and by when? [[more]]',
  '[[q]]Find all [[thing]] in the [[doc]] that [[name]] wrote. [[more]]',
  '[[q]]What is the first [[col]] in the [[doc]] after [[name]]?',
  '[[q]]Compare the [[amount]] in this [[doc]] with the one from [[company]]. [[more]]',
]

export interface QuestionRow { readonly text: string, readonly template: string }

/** Up to `perTemplate` distinct questions of each template. */
export function generatedQuestions (perTemplate = 10): QuestionRow[] {
  const out: QuestionRow[] = []
  TEMPLATES.forEach((t, i) => {
    const next = rng(4200 + i)
    const seen = new Set<string>()
    for (let k = 0; k < perTemplate * 4 && seen.size < perTemplate; k++) seen.add(expand(t, SLOTS, next))
    for (const text of seen) out.push({ text, template: `question_${i}` })
  })
  return out
}
