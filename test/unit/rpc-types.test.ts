// The operation table's types (src/domain/rpc.ts) refuse what the store worker's handler object and the
// store client's calls must never do. Each refusal is a `@ts-expect-error`, so this file stops compiling
// (and `npm run build` fails) the day a handler could be left out, added or mistyped unnoticed.
import t from 'tap'
import type { Handlers, Op, Request } from '../../src/domain/rpc.js'
import type { StoreOps } from '../../src/store/protocol.js'

interface Table {
  find: Op<[{ id: string }], string | null>
  count: Op<[], number>
}

/** A server over Table, its handlers given an id as their context. */
function serve (handlers: Handlers<Table, number>) {
  return <K extends keyof Table> (msg: Request<Table, K>): Table[K]['result'] | Promise<Table[K]['result']> => handlers[msg.op](msg.id, ...msg.args)
}

t.test('a handler object must implement exactly the table', async (t) => {
  const run = serve({ find: async (_id, { id }) => (id === 'a' ? 'found' : null), count: (id) => id })
  t.equal(await run({ id: 1, op: 'find', args: [{ id: 'a' }] }), 'found')
  t.equal(await run({ id: 7, op: 'count', args: [] }), 7)

  // @ts-expect-error a missing handler
  serve({ find: () => null })
  // @ts-expect-error a handler for an operation the table does not have
  serve({ find: () => null, count: () => 0, extra: () => 0 })
  // @ts-expect-error a handler that answers the wrong type
  serve({ find: () => 1, count: () => 0 })
  // @ts-expect-error a handler that reads an argument the operation does not have
  serve({ find: (_id, a: { key: string }) => a.key, count: () => 0 })
})

t.test('a request carries its operation\'s arguments', async (t) => {
  const ok: Request<Table, 'find'> = { id: 1, op: 'find', args: [{ id: 'x' }] }
  // @ts-expect-error the arguments of another operation
  const bad: Request<Table, 'find'> = { id: 1, op: 'find', args: [] }
  // @ts-expect-error an operation the store does not have
  const unknown: Request<StoreOps> = { id: 1, op: 'dropTable', args: [] }
  t.same([ok.op, bad.op, unknown.id], ['find', 'find', 1])
})
