// What state a key is in at a given moment: the one rule behind the proxy's and the read API's 401s, the
// dashboard's key list and the CLI's. A revoked key stays revoked whatever its expiry; a key expires at
// its expiry time exactly (the proxy refuses it from that millisecond on).

export type KeyStatus = 'active' | 'revoked' | 'expired'

/** What the status reads of a key: whether it was revoked, and when it expires (epoch ms; null: never). */
export interface KeyState {
  readonly revoked: boolean
  readonly expiresAt: number | null
}

export function keyStatus (k: KeyState, now: number): KeyStatus {
  if (k.revoked) return 'revoked'
  if (k.expiresAt !== null && k.expiresAt <= now) return 'expired'
  return 'active'
}
