// The detector's own over-defense and attack rows (training/detector/generate.ts, data.ts): the generator
// is deterministic for a seed, and the held-out part is split by template, so no phrasing and no text
// of it is ever trained on.
import t from 'tap'
import { DEFAULT_SEED, generate } from '../../training/detector/generate.js'
import { ownRows } from '../../training/detector/data.js'

t.test('the same seed gives the same rows, another seed other rows', async (t) => {
  const a = generate()
  t.same(generate(DEFAULT_SEED), a, 'same rows for the same seed')
  t.notSame(generate(DEFAULT_SEED + 1).map((r) => r.text), a.map((r) => r.text), 'another seed fills the slots differently')
  t.ok(a.length > 1500, `${a.length} rows`)
  t.ok(a.every((r) => !r.text.includes('[[') && !r.text.includes(']]')), 'every slot is filled')
})

t.test('the held-out part shares no template and no text with the train part', async (t) => {
  const rows = generate()
  const trainTemplates = new Set(rows.filter((r) => r.split === 'train').map((r) => r.template))
  const held = rows.filter((r) => r.split === 'heldout')
  t.ok(held.length > 400, `${held.length} held-out rows`)
  t.notOk(held.some((r) => trainTemplates.has(r.template)), 'no template on both sides')
  for (const topic of new Set(rows.map((r) => r.topic))) t.ok(held.some((r) => r.topic === topic), `topic ${topic} has held-out rows`)
  // The own rows only: the shared data set is not part of the repository.
  const trained = new Set(ownRows('train').map((r) => r.text))
  const leaked = ownRows('heldout').filter((r) => trained.has(r.text))
  t.same(leaked.map((r) => r.text), [], 'no held-out text is a training text')
})
