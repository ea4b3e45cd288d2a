// Connection-level behaviour of the front end: abandoned uploads, keep-alive, and the 503 answered
// on an open connection once shutdown has begun.
import { connect, type Socket } from 'node:net'
import t from 'tap'
import { startServer } from '../helpers/server.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { sleep } from '../helpers/wait.js'

const s = await startServer(t, { TRACEGATE_SHUTDOWN_GRACE_MS: '5000' })
const port = s.tg.proxyPort

function open (): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1', () => { resolve(sock) })
    sock.once('error', reject)
  })
}

function request (body: string): string {
  return `POST ${ROUTES.alpha} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
}

/** Reads from the socket until `done` says the text so far is complete. */
function readUntil (sock: Socket, done: (text: string) => boolean, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = ''
    const timer = setTimeout(() => { reject(new Error(`timed out reading; got ${JSON.stringify(text)}`)) }, timeoutMs)
    const onData = (b: Buffer): void => {
      text += b.toString('utf8')
      if (done(text)) {
        clearTimeout(timer)
        sock.off('data', onData)
        resolve(text)
      }
    }
    sock.on('data', onData)
  })
}

async function waitIdle (): Promise<void> {
  for (let i = 0; i < 100 && s.tg.inflight > 0; i++) await sleep(20)
}

const key = s.key
const ok = JSON.stringify(bodyFor('alpha', { api_key: key }))

t.test('an upload the client abandons ends the exchange and leaves the server serving', async (t) => {
  await waitIdle()
  const sock = await open()
  sock.write(`POST ${ROUTES.alpha} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 5000\r\n\r\n{"api_key":"`)
  await sleep(100)
  t.equal(s.tg.inflight, 1, 'the half-read upload is in flight')
  sock.destroy()
  await waitIdle()
  t.equal(s.tg.inflight, 0, 'and is over once the client is gone')
  const again = await open()
  again.write(request(ok))
  const answer = await readUntil(again, (x) => x.includes('"chat.completion"'))
  t.match(answer, /^HTTP\/1\.1 200 /)
  again.destroy()
})

t.test('many requests on one keep-alive connection', async (t) => {
  const sock = await open()
  for (let i = 0; i < 20; i++) {
    sock.write(request(ok))
    const answer = await readUntil(sock, (x) => x.includes('"chat.completion"'))
    t.match(answer, /^HTTP\/1\.1 200 /, `request ${i}`)
  }
  sock.destroy()
})

t.test('once shutdown begins, an open connection gets 503 while an in-flight stream finishes', async (t) => {
  const streaming = await open()
  streaming.write(request(JSON.stringify(bodyFor('alpha', { api_key: key, model: 'mock-chunks-6-gap-150', stream: true }))))
  const streamed = readUntil(streaming, (x) => x.includes('data: [DONE]'), 10_000)
  const idle = await open()
  idle.write(request(ok))
  await readUntil(idle, (x) => x.includes('"chat.completion"'))
  await sleep(100)
  const closing = s.tg.close()
  idle.write(request(ok))
  const refused = await readUntil(idle, (x) => /\r\n\r\n\{.*\}$/s.test(x))
  t.match(refused, /^HTTP\/1\.1 503 /)
  t.match(refused, /"code":"service_unavailable"/)
  t.match(await streamed, /data: \[DONE\]/, 'the in-flight stream ends cleanly')
  await closing
  idle.destroy()
  streaming.destroy()
})
