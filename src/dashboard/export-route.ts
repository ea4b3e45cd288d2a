// GET /api/ui/traces/export and /api/v1/traces/export: the trace list's filter as a CSV or JSONL download,
// streamed. The store worker sends a page of rows at a time (store/worker/trace-export.ts) and the next
// only once this response took the last one and the socket drained it (uWS onWritable), so a slow or
// stalled client holds one page in memory, not the export. Bad parameters answer as JSON errors before
// anything is sent; a failure mid-stream closes the connection, so a cut-short file is never taken for
// a whole one.
import { TracegateError } from '../errors.js'
import { MALFORMED } from '../server/head.js'
import { statusLine } from '../server/respond.js'
import type { HttpRequest, HttpResponse } from '../server/uws.js'
import type { StoreClient } from '../store/client.js'
import { checkHead, errorReply, HttpError, readRequest, SECURITY_HEADERS, send, type Req, type RouteOptions } from './http.js'
import { exportQuery } from './params.js'

const TYPES = { csv: 'text/csv; charset=utf-8', jsonl: 'application/x-ndjson; charset=utf-8' } as const

/** `traces-20261124-095700.csv`: UTC, so the name is the same wherever it is downloaded. */
function fileName (now: number, format: 'csv' | 'jsonl'): string {
  const t = new Date(now).toISOString()
  return `traces-${t.slice(0, 10).replace(/-/g, '')}-${t.slice(11, 19).replace(/:/g, '')}.${format}`
}

/** The route; `account` gives the caller's account (session or read key) or throws the refusal. */
export function exportRoute (store: StoreClient, account: (req: Req) => Promise<string> | string, options: RouteOptions) {
  return (res: HttpResponse, ureq: HttpRequest): void => {
    if (checkHead(res, ureq) === MALFORMED) return
    const req = readRequest(res, ureq)
    const state = { aborted: false, started: false }
    let drained: (() => void) | null = null
    res.onAborted(() => {
      state.aborted = true
      drained?.()
    })
    const fail = (err: unknown): void => {
      if (!(err instanceof TracegateError)) options.onFault?.(err)
      if (state.aborted) return
      if (state.started) {
        state.aborted = true
        res.close()
        return
      }
      send(res, req.id, errorReply(err, req.id, err instanceof HttpError ? err.headers : []))
    }
    if (options.isClosing?.() === true) {
      fail(new TracegateError('service_unavailable'))
      return
    }
    const run = async (): Promise<void> => {
      const accountId = await account(req)
      const x = exportQuery(accountId, req.query)
      const head = (): void => {
        state.started = true
        res.writeStatus(statusLine(200))
        for (const [k, v] of SECURITY_HEADERS) res.writeHeader(k, v)
        res.writeHeader('x-request-id', req.id)
        res.writeHeader('content-type', TYPES[x.format])
        res.writeHeader('content-disposition', `attachment; filename="${fileName(Date.now(), x.format)}"`)
        res.writeHeader('cache-control', 'no-store')
      }
      const chunk = async (text: string): Promise<boolean> => {
        if (state.aborted) return false
        let ok = true
        res.cork(() => {
          if (!state.started) head()
          ok = res.write(text)
        })
        if (!ok && !state.aborted) {
          // uWS holds what it could not send yet; the next page waits until the socket drained it.
          await new Promise<void>((resolve) => {
            drained = resolve
            res.onWritable(() => {
              drained = null
              resolve()
              return true
            })
          })
        }
        return !state.aborted
      }
      await store.stream('exportTraces', { filter: x.filter, format: x.format, maxRows: x.maxRows }, chunk)
      if (state.aborted) return
      res.cork(() => {
        if (!state.started) head()
        res.end()
      })
    }
    run().catch(fail)
  }
}
