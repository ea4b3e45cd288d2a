// A key's scope: `proxy` keys call providers, `read` keys call the read API, `sql` keys query their
// account's traces on the SQL port.
// Imports nothing of a thread (a leaf: test/unit/import-rules.test.ts keeps it one).

export type Scope = 'proxy' | 'read' | 'sql'
export const SCOPES: readonly Scope[] = ['proxy', 'read', 'sql']
