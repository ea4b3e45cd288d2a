// The pools of server-side keys and the targets' rests, as shared-rests.ts applies what another thread or
// instance published: a key set aside or resting elsewhere is not picked here, a target resting elsewhere
// is skipped; rests only grow.
import t from 'tap'
import { applyKeyRest, keyId, keyPoolFor } from '../../src/upstream/key-pool.js'
import { applyTargetRest, targetsFor } from '../../src/upstream/fallover.js'

t.test('a key set aside or resting elsewhere is not picked; the other keys take turns', async (t) => {
  const pool = keyPoolFor('unit-keys', ['key-one', 'key-two', 'key-three'], () => {})!
  const now = Date.now()
  t.same([pool.pick(now, 0), pool.pick(now, 0), pool.pick(now, 0)], [0, 1, 2], 'in turn')
  applyKeyRest('unit-keys', keyId('key-two'), 0, 401)
  applyKeyRest('unit-keys', keyId('key-three'), now + 60_000, 429)
  t.same([pool.pick(now, 0), pool.pick(now, 0)], [0, 0], 'only the usable key')
  applyKeyRest('other-provider', keyId('key-one'), 0, 403)
  t.equal(pool.pick(now, 0), 0, 'a message for another provider changes nothing here')
  t.equal(pool.pick(now + 61_000, 0), 2, 'the rest ends; the set-aside key stays aside')
  t.equal(keyPoolFor('unit-keys', ['only'], () => {}), null, 'one key is no pool')
})

t.test('a target resting elsewhere is skipped until its rest ends; a shorter rest does not shorten it', async (t) => {
  const targets = targetsFor('unit-targets', ['http://a.example', 'http://b.example'])
  const now = Date.now()
  applyTargetRest('unit-targets', 'http://a.example', now + 30_000)
  applyTargetRest('unit-targets', 'http://a.example', now + 1_000)
  t.ok(targets.cooling(0, now + 20_000), 'resting')
  t.notOk(targets.cooling(1, now), 'the other target is not')
  t.notOk(targets.cooling(0, now + 31_000), 'until its rest ends')
})
