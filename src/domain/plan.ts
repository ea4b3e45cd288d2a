// An account's plan: the vocabulary the store, the key decision and the admin tools share.
// Imports nothing of a thread (a leaf: test/unit/import-rules.test.ts keeps it one).

export type Plan = 'free' | 'pro' | 'enterprise'
export const PLANS: readonly Plan[] = ['free', 'pro', 'enterprise']
