// The shape of a request/response protocol over a message port: one table maps each operation's name to
// its arguments and result, and both sides are typed from it (the caller's `call`, the server's handler
// object: a missing, extra or mistyped handler fails tsc). Type-only: nothing here exists at run time.

/** One operation: the arguments the caller passes (a tuple, [] for none) and what it gets back. */
export interface Op<A extends readonly unknown[] = readonly unknown[], R = unknown> {
  readonly args: A
  readonly result: R
}

/** A protocol's table, operation name → Op; any interface whose members are Ops satisfies `OpTable<T>`. */
export type OpTable<T> = { readonly [K in keyof T]: Op }

/** A request on the wire; `id` pairs it with its response. */
export interface Request<T extends OpTable<T>, K extends keyof T = keyof T> {
  readonly id: number
  readonly op: K
  readonly args: T[K]['args']
}

/** The answer to request `id`: its value, or the error's message and stable code (null: no code). */
export type Response<T extends OpTable<T>, K extends keyof T = keyof T> =
  | { readonly id: number; readonly ok: true; readonly value: T[K]['result'] }
  | { readonly id: number; readonly ok: false; readonly error: { readonly message: string; readonly code: string | null } }

/** The serving side: exactly one handler per operation, given the server's context `C` before the arguments. */
export type Handlers<T extends OpTable<T>, C> = {
  readonly [K in keyof T]: (context: C, ...args: T[K]['args']) => T[K]['result'] | Promise<T[K]['result']>
}
