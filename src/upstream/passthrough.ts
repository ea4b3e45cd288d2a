// An undici dispatch handler that pipes the provider's answer to the uWS response as it arrives.
// Backpressure runs both ways: when uWS cannot take a chunk at once the upstream is paused, and it
// resumes when the socket drains (https://github.com/uNetworking/uWebSockets.js/blob/master/examples/VideoStreamer.js).
import type { Dispatcher } from 'undici'
import type { Exchange } from '../proxy/exchange.js'
import { statusLine } from '../server/respond.js'

type Controller = Dispatcher.DispatchController
type Headers = Record<string, string | string[] | undefined>

export class Passthrough implements Dispatcher.DispatchHandler {
  readonly #x: Exchange

  constructor (exchange: Exchange) {
    this.#x = exchange
  }

  onRequestStart (controller: Controller): void {
    this.#x.attachUpstream(controller)
  }

  onResponseStart (controller: Controller, statusCode: number, headers: Headers): void {
    const x = this.#x
    x.upstreamResponded(statusCode)
    if (x.aborted) return
    const res = x.res
    const dialect = x.dialect
    res.cork(() => {
      res.writeStatus(statusLine(statusCode)).writeHeader('x-request-id', x.requestId)
      for (const name in headers) {
        const out = dialect.responseHeader(name)
        const value = headers[name]
        if (out === null || value === undefined) continue
        if (typeof value === 'string') res.writeHeader(out, value)
        else for (const v of value) res.writeHeader(out, v)
      }
    })
    x.headersSent = true
  }

  onResponseData (controller: Controller, chunk: Buffer): void {
    const x = this.#x
    if (x.aborted) return
    x.responseChunk(chunk)
    const res = x.res
    let ok = true
    res.cork(() => { ok = res.write(chunk) })
    if (!ok && !controller.paused) {
      controller.pause()
      res.onWritable(() => {
        controller.resume()
        return true
      })
    }
  }

  onResponseEnd (): void {
    const x = this.#x
    if (x.aborted) {
      x.finish('client_aborted')
      return
    }
    x.res.cork(() => { x.res.end() })
    x.finish(x.status >= 400 ? 'provider_error' : 'ok')
  }

  onResponseError (controller: Controller, err: Error): void {
    this.#x.upstreamFailed(err)
  }
}
