// A key is found by its SHA-256 in hex: keys stored by any release must still match, whichever way this
// Node computes the digest (the one-shot crypto.hash, or createHash before Node 20.12).
import t from 'tap'
import { createHash } from 'node:crypto'
import { generateKey, hashKey, KEY_PATTERN } from '../../src/auth/keys.js'

t.test('hashKey is SHA-256 in lower-case hex', async (t) => {
  t.equal(hashKey('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad', 'SHA-256 of "abc"')
  const key = generateKey()
  t.match(key, KEY_PATTERN)
  t.equal(hashKey(key), createHash('sha256').update(key).digest('hex'), 'a generated key, as createHash gives it')
  t.equal(hashKey('tgk_é'), createHash('sha256').update('tgk_é', 'utf8').digest('hex'), 'text is hashed as UTF-8')
})
