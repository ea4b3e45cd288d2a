// Why a prompt was blocked, on the trace detail page: the rule each injection
// finding matched and the words that raised the model's score, as the detector stores them on the
// trace's findings; as text (markup in a stored finding is never markup); nothing for findings stored
// without them. Traces are handed to the store worker as the front thread hands them.
import t from 'tap'
import type { Issue } from '../../src/detection/types.js'
import { adminPage, checkWatched, screenshot } from '../helpers/browser.js'
import { handOver, traceMeta } from '../helpers/handoff.js'
import { storedTrace } from '../helpers/store.js'

const { d, page, watched, owner } = await adminPage(t)

const HTML = '<img src=x onerror="window.__why=1">'
const DETECTION = JSON.stringify({ ran: true, blocked: true, score: 0.97, categories: ['instruction_override', 'model'], ms: 0.3 })

/** A blocked call whose stored findings are `issues`; opens its detail page. */
async function open (issues: readonly Issue[], detection = DETECTION): Promise<void> {
  const m = { ...traceMeta(owner, null), status: 403, outcome: 'blocked' as const, errorCode: 'prompt_injection_detected', detection, issues: JSON.stringify(issues) }
  handOver(d.tg, [m])
  await storedTrace(d.tg, owner.accountId, m.traceId)
  await page.goto(`/traces/${m.traceId}`)
  await page.locator('[data-testid=trace-detail]').waitFor()
}

const finding = (over: Partial<Issue>): Issue => ({
  category: 'prompt_injection', kind: 'instruction_override', severity: 'high', detail: 'instruction_override score 0.970', segment: 0, message: 0, span: [0, 2], ...over,
})

t.test('the rules and the model words of the injection findings, in order, as text', async (t) => {
  await open([
    finding({ rule: 'override_previous' }),
    finding({ kind: 'prompt_exfiltration', detail: 'prompt_exfiltration score 0.950', rule: 'reveal_system_prompt' }),
    finding({ kind: 'model', detail: 'model score 0.990', features: [{ feature: 'instructions', weight: 2.15 }, { feature: 'ignore', weight: 1 }, { feature: HTML, weight: 0.5 }] }),
    { category: 'pii', kind: 'email', severity: 'medium', detail: 'j***@example.org', segment: 0, message: 0, span: [0, 1] },
  ])
  const why = page.locator('[data-testid=detection-why]')
  t.equal(await why.count(), 1, 'a why block')
  t.same(await why.locator('[data-testid=why-rule]').allTextContents(), [
    'instruction_override: rule override_previous (message 0)',
    'prompt_exfiltration: rule reveal_system_prompt (message 0)',
  ], 'each rule that matched, with its family and message')
  t.same(await why.locator('[data-testid=why-word]').allTextContents(), ['instructions +2.15', 'ignore +1.00', `${HTML} +0.50`], 'the model words with their weights, strongest first')
  t.match(await why.locator('[data-testid=why-model]').textContent() ?? '', /^model words \(message 0\): instructions \+2\.15, ignore/, 'the model line')
  t.equal(await why.locator('img').count(), 0, 'markup in a stored word is text')
  t.equal(await page.evaluate(() => (window as { __why?: number }).__why ?? 0), 0, 'and ran nothing')
  t.notOk((await why.textContent() ?? '').includes('j***'), 'PII findings are not part of it')
  await screenshot(page, 'detection-why')
  checkWatched(t, watched)
})

t.test('each finding names the span judged: who wrote it and its path', async (t) => {
  await open([
    finding({ kind: 'planted_instruction', detail: 'planted_instruction score 0.900', rule: 'planted_note_to_ai', message: 1, source: 'data', path: 'messages[1].content' }),
    finding({ rule: 'override_previous', message: -1, source: 'application', path: 'tools[0].function.description' }),
    finding({ kind: 'model', detail: 'model score 0.990', source: 'user', path: 'messages[0].content', features: [{ feature: 'ignore', weight: 1 }] }),
  ])
  const why = page.locator('[data-testid=detection-why]')
  t.same(await why.locator('[data-testid=why-rule]').allTextContents(), [
    'instruction_override: rule override_previous (system prompt, the application\'s text, tools[0].function.description)',
    'planted_instruction: rule planted_note_to_ai (message 1, data the model reads, messages[1].content)',
  ], 'the rules with the span they judged, in the order the findings are listed')
  t.match(await why.locator('[data-testid=why-model]').textContent() ?? '', /^model words \(message 0, the user's words, messages\[0\]\.content\): ignore/, 'and the model line')
  checkWatched(t, watched)
})

t.test('no why block for findings stored without rules or words', async (t) => {
  await open([finding({}), finding({ kind: 'model', detail: 'model score 0.990' })])
  t.equal(await page.locator('[data-testid=finding]').count(), 2, 'the findings are listed')
  t.equal(await page.locator('[data-testid=detection-why]').count(), 0, 'no why block')
  checkWatched(t, watched)
})

t.test('the threshold a call was judged against is shown to three decimals, as the detector\'s own is stored unrounded', async (t) => {
  await open([finding({})], JSON.stringify({ ran: true, blocked: true, score: 0.97, threshold: 0.734595775604248, categories: ['model'], ms: 0.3 }))
  const summary = (await page.locator('[data-testid=detection-summary]').textContent() ?? '').trim()
  t.match(summary, /^Injection score 0\.970 against a threshold of 0\.735 — blocked/, `the summary (${summary})`)
  t.notMatch(summary, /0\.7345/, 'never the unrounded threshold')
  checkWatched(t, watched)
})
