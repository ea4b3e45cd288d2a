// The store worker: the only thread that talks to ClickHouse. It answers the front thread's requests
// (protocol.ts) one message at a time; writes that check-then-insert run one after another.
import { parentPort, workerData } from 'node:worker_threads'
import type { ClickHouseClient } from '@clickhouse/client'
import { AccountStore, StoreOpError } from './accounts.js'
import { connect } from './connect.js'
import { migrate } from './migrate.js'
import type { OpName, StoreRequest, StoreResponse, StoreWorkerData } from './protocol.js'

const data = workerData as StoreWorkerData
const port = parentPort!

let client: ClickHouseClient | null = null
let accounts: AccountStore | null = null
let ready: Promise<void> | null = null
let writes: Promise<unknown> = Promise.resolve()

const SERIAL: ReadonlySet<OpName> = new Set(['createAccount', 'createUser', 'createKey', 'revokeKey', 'migrate'])

function open (): Promise<void> {
  ready ??= (async () => {
    client = await connect(data.dataDir, data.clickhouse)
    accounts = new AccountStore(client)
  })()
  return ready
}

async function run (op: OpName, args: unknown): Promise<unknown> {
  await open()
  const ch = client!
  const store = accounts!
  switch (op) {
    case 'ping': {
      const r = await ch.ping()
      return r.success
    }
    case 'migrate': return migrate(ch, data.migrationsDir)
    case 'lookupKey': return store.lookupKey(args as never)
    case 'countAccounts': return store.countAccounts()
    case 'createAccount': return store.createAccount(args as never)
    case 'getAccount': return store.getAccount(args as never)
    case 'createUser': return store.createUser(args as never)
    case 'createKey': return store.createKey(args as never)
    case 'revokeKey': return store.revokeKey(args as never)
    case 'listKeys': return store.listKeys(args as never)
  }
}

function reply (msg: StoreResponse): void {
  port.postMessage(msg)
}

port.on('message', (msg: StoreRequest | 'close') => {
  if (msg === 'close') {
    void (async () => {
      await writes.catch(() => {})
      if (client !== null) await client.close().catch(() => {})
      port.postMessage('closed')
      port.close()
    })()
    return
  }
  const exec = (): Promise<unknown> => run(msg.op, msg.args)
  let p: Promise<unknown>
  if (SERIAL.has(msg.op)) {
    p = writes.then(exec, exec)
    writes = p.catch(() => {})
  } else {
    p = exec()
  }
  p.then(
    (value) => reply({ id: msg.id, ok: true, value }),
    (err: unknown) => reply({
      id: msg.id,
      ok: false,
      error: {
        message: err instanceof Error ? err.message : String(err),
        code: err instanceof StoreOpError ? err.code : null,
      },
    }),
  )
})
