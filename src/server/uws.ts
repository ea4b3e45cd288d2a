// uWebSockets.js, native or not at all, and the one way every port listens with it. The package silently
// falls back to a slow JavaScript implementation when its binary does not load; we load the
// binary ourselves and refuse to start instead.
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import type * as UWS from 'uWebSockets.js'

const require = createRequire(import.meta.url)

function loadNative (): typeof UWS {
  const pkg = dirname(require.resolve('uWebSockets.js/package.json'))
  const binary = join(pkg, 'binaries', `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`)
  try {
    return require(binary) as typeof UWS
  } catch (err) {
    throw new Error(
      `uWebSockets.js has no native binary for Node ${process.version} on ${process.platform}-${process.arch} ` +
      `(${(err as Error).message.split('\n')[0]}). tracegate refuses to run on its JavaScript fallback; use Node 20.`,
    )
  }
}

export const uws = loadNative()

export type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js'

/** Listens on host:port (0 = any free port) and returns the socket and the bound port. */
export function listen (app: UWS.TemplatedApp, host: string, port: number): Promise<{ socket: unknown; port: number }> {
  return new Promise((resolve, reject) => {
    app.listen(host, port, (socket: UWS.us_listen_socket | false) => {
      if (socket === false) reject(new Error(`cannot listen on ${host}:${port}`))
      else resolve({ socket, port: uws.us_socket_local_port(socket) })
    })
  })
}
