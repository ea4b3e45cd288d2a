// The caller's labels on the trace detail page: user, session, tags and metadata as the
// store holds them, in the caller's order, as text (markup in a label is never markup), and no Labels
// card for a call that sent none. Traces are handed to the store worker as the front thread hands them.
import t from 'tap'
import type { CallLabels } from '../../src/store/trace-types.js'
import { adminPage, checkWatched, screenshot } from '../helpers/browser.js'
import { handOver, traceMeta } from '../helpers/handoff.js'
import { storedTrace } from '../helpers/store.js'

const { d, page, watched, owner } = await adminPage(t)

const HTML = '<img src=x onerror="window.__labelled=1"><script>window.__labelled=2</script>'

async function open (labels: CallLabels | null): Promise<void> {
  const m = traceMeta(owner, labels)
  handOver(d.tg, [m])
  await storedTrace(d.tg, owner.accountId, m.traceId)
  await page.goto(`/traces/${m.traceId}`)
  await page.locator('[data-testid=trace-detail]').waitFor()
}

t.test('every label as stored, in order, as text', async (t) => {
  const labels: CallLabels = {
    user: `user ${HTML}`,
    session: 'sess-0f1e2d3c 東京 😀',
    tags: ['prod', "a'b", HTML, 'c,d'],
    metadata: JSON.parse(`{"team":"payments","__proto__":"p","note":"line one\\nline two",${JSON.stringify(HTML)}:${JSON.stringify(HTML)}}`) as Record<string, string>,
  }
  await open(labels)
  const card = page.locator('[data-testid=labels]')
  t.equal(await card.count(), 1, 'a Labels card')
  t.equal(await page.locator('[data-testid=label-user]').textContent(), labels.user, 'the user')
  t.equal(await page.locator('[data-testid=label-session]').textContent(), labels.session, 'the session')
  t.same(await page.locator('[data-testid=label-tag]').allTextContents(), labels.tags, 'the tags, in order')
  const entries = page.locator('[data-testid=metadata-entry]')
  const shown: Array<[string, string]> = []
  for (let i = 0; i < await entries.count(); i++) {
    shown.push([await entries.nth(i).locator('th').textContent() ?? '', await entries.nth(i).locator('td').textContent() ?? ''])
  }
  t.same(shown, Object.entries(labels.metadata), 'the metadata, key by key, in order')
  t.equal(await card.locator('img, script').count(), 0, 'markup in a label is text')
  t.equal(await page.evaluate(() => (window as { __labelled?: number }).__labelled ?? 0), 0, 'and ran nothing')
  await screenshot(page, 'trace-labels')
  checkWatched(t, watched)
})

t.test('only the labels the caller sent', async (t) => {
  await open({ user: '', session: 's-1', tags: [], metadata: {} })
  t.equal(await page.locator('[data-testid=label-session]').textContent(), 's-1', 'the session')
  t.equal(await page.locator('[data-testid=label-user], [data-testid=label-tags], [data-testid=label-metadata]').count(), 0, 'nothing for the others')
  await open(null)
  t.equal(await page.locator('[data-testid=labels]').count(), 0, 'no Labels card for a call without labels')
  await open({ user: '', session: '', tags: [], metadata: {} })
  t.equal(await page.locator('[data-testid=labels]').count(), 0, 'nor for labels that are all empty')
  checkWatched(t, watched)
})
