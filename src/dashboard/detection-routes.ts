// Settings → Account, the detection policy and the PII at rest: read by any user of the account, changed
// by its admins only (monitor or off lets injections through to the provider for every key of the
// account; keep stores personal data the account may have chosen not to). Changes go through AdminOps,
// so the dashboard and the CLI refuse the same values, and the key cache drops the account's keys, so
// the proxy applies the change from its next call.
import type { AdminOps } from '../admin/ops.js'
import { detectionView } from '../admin/views.js'
import { parseDetectionPatch, UI_NAMES, UI_PII_NAMES } from '../detection/policy.js'
import { TracegateError } from '../errors.js'
import type { Guards } from './guards.js'
import type { Reply, Req } from './http.js'
import type { AccountDetection, DetectionPolicy, PiiAtRest } from '../domain/detection-policy.js'

const FIELDS = ['policy', 'threshold', 'data_threshold', 'allow_phrases'] as const

/**
 * An update's body: these members only (a misspelt one is refused, not ignored) and at least one;
 * absent = unchanged, threshold null or '' = the detector's own, data_threshold null or '' = the
 * threshold, allow_phrases [] or '' = none.
 * Checked with the CLI's rules, answered as 400 invalid_parameter naming the member.
 */
function detectionUpdate (body: Record<string, unknown>): Record<string, unknown> {
  for (const name of Object.keys(body)) {
    if (!(FIELDS as readonly string[]).includes(name)) {
      throw new TracegateError('invalid_parameter', { param: name, message: `${name} is not a detection setting; they are ${FIELDS.join(', ')}` })
    }
  }
  const patch = parseDetectionPatch(body, { names: UI_NAMES, code: 'invalid_parameter' })
  const args: Record<string, unknown> = {}
  if (patch.policy !== undefined) args.detection_policy = patch.policy
  if (patch.threshold !== undefined) args.detection_threshold = patch.threshold
  if (patch.dataThreshold !== undefined) args.detection_data_threshold = patch.dataThreshold
  if (patch.allowPhrases !== undefined) args.detection_allow = patch.allowPhrases
  if (Object.keys(args).length === 0) throw new TracegateError('invalid_parameter', { message: `give at least one of ${FIELDS.join(', ')}` })
  return args
}

/** `/api/ui/account/pii-at-rest`: what the stored prompt and response keep of PII and secrets. */
export interface PiiAtRestView {
  readonly pii_at_rest: PiiAtRest
  readonly editable: boolean
}

/** An update's body: exactly `pii_at_rest`, keep or mask (400 invalid_parameter naming the member otherwise). */
function piiUpdate (body: Record<string, unknown>): Record<string, unknown> {
  for (const name of Object.keys(body)) {
    if (name !== 'pii_at_rest') throw new TracegateError('invalid_parameter', { param: name, message: `${name} is not a setting here; it is pii_at_rest` })
  }
  const patch = parseDetectionPatch(body, { names: UI_PII_NAMES, code: 'invalid_parameter' })
  if (patch.piiAtRest === undefined) throw new TracegateError('invalid_parameter', { param: 'pii_at_rest', message: 'give pii_at_rest: keep or mask' })
  return { pii_at_rest: patch.piiAtRest }
}

export class DetectionRoutes {
  readonly #admin: AdminOps
  readonly #guards: Guards

  constructor (admin: AdminOps, guards: Guards) {
    this.#admin = admin
    this.#guards = guards
  }

  /** The account's policy, and whether this user may change it. */
  get = async (req: Req): Promise<Reply> => {
    const c = await this.#guards.caller(req, false)
    return { status: 200, body: { detection: detectionView(c.account.detection), editable: c.admin } }
  }

  /** Admins only: a member must not be able to turn blocking off for every key of the account. */
  update = async (req: Req): Promise<Reply> => {
    const c = await this.#guards.admin(req, 'change its detection policy')
    const args = detectionUpdate(req.body as Record<string, unknown>)
    const row = await this.#admin.updateAccount({ id: c.accountId, ...args })
    return { status: 200, body: { detection: detectionView(row.detection), editable: true } }
  }

  /** The account's PII at rest, and whether this user may change it. */
  piiAtRest = async (req: Req): Promise<Reply> => {
    const c = await this.#guards.caller(req, false)
    const body: PiiAtRestView = { pii_at_rest: c.account.detection.piiAtRest, editable: c.admin }
    return { status: 200, body }
  }

  /** Admins only: a member must not be able to store personal data an account chose to mask, nor the reverse. */
  updatePiiAtRest = async (req: Req): Promise<Reply> => {
    const c = await this.#guards.admin(req, 'change what its stored traces keep of PII')
    const args = piiUpdate(req.body as Record<string, unknown>)
    const row = await this.#admin.updateAccount({ id: c.accountId, ...args })
    const body: PiiAtRestView = { pii_at_rest: row.detection.piiAtRest, editable: true }
    return { status: 200, body }
  }
}
