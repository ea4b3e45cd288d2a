// The trace list's orders: the dashboard's parameters check them, the store worker sorts by them.
// Imports nothing of a thread (a leaf: test/unit/import-rules.test.ts keeps it one).

export const SORT_KEYS = ['time', 'latency', 'cost', 'tokens'] as const
export type SortKey = (typeof SORT_KEYS)[number]
