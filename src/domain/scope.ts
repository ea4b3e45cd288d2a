// A key's scope: `proxy` keys call providers, `read` keys call the read API.
// Imports nothing of a thread (a leaf: test/unit/import-rules.test.ts keeps it one).

export type Scope = 'proxy' | 'read'
export const SCOPES: readonly Scope[] = ['proxy', 'read']
