// PII detection over prompt segments: email, phone, payment card, IBAN, US SSN. Findings are recorded
// as issues (not blocking), each with a masked detail (see mask.ts). Every scan here is linear: fixed
// or bounded regexes found by a cheap prefilter, validated in plain code, so a 32,000-character prompt
// costs well under a millisecond.
import { findPhoneNumbersInText } from 'libphonenumber-js/min'
import type { Issue, Segment, Severity } from '../detection/types.js'
import { digitsOf, maskEmail } from './mask.js'

export function findPii (segments: readonly Segment[]): Issue[] {
  const issues: Issue[] = []
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]
    if (segment === undefined || segment.text.length < 6) continue
    const found: Issue[] = []
    const add = (kind: string, severity: Severity, detail: string, start: number, end: number): void => {
      found.push({ category: 'pii', kind, severity, detail, segment: i, message: segment.message, span: [start, end] })
    }
    const text = segment.text
    findEmails(text, add)
    findCards(text, add)
    findIbans(text, add)
    findSsns(text, add)
    // Phones last: a card, IBAN or SSN already found is not also reported as a phone number.
    findPhones(text, found, add)
    found.sort((a, b) => a.span[0] - b.span[0])
    for (const issue of found) issues.push(issue)
  }
  return issues
}

type Add = (kind: string, severity: Severity, detail: string, start: number, end: number) => void

// ---- email ---------------------------------------------------------------------------------------

const isAlnum = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122)
const isDigit = (c: number): boolean => c >= 48 && c <= 57
// Local part: letters, digits and . _ % + - (the common subset of RFC 5322 atext).
const isLocal = (c: number): boolean => isAlnum(c) || c === 46 || c === 95 || c === 37 || c === 43 || c === 45
const isDomain = (c: number): boolean => isAlnum(c) || c === 46 || c === 45

/** Anchored on each '@' and expanded both ways with bounded loops: no regex backtracking. */
function findEmails (text: string, add: Add): void {
  let at = text.indexOf('@')
  while (at !== -1) {
    let start = at
    while (start > 0 && at - start < 64 && isLocal(text.charCodeAt(start - 1))) start--
    while (start < at && text.charCodeAt(start) === 46) start++
    let end = at + 1
    while (end < text.length && end - at <= 253 && isDomain(text.charCodeAt(end))) end++
    while (end > at + 1 && (text.charCodeAt(end - 1) === 46 || text.charCodeAt(end - 1) === 45)) end--
    if (start < at && validDomain(text, at + 1, end)) {
      add('email', 'medium', maskEmail(text.slice(start, end)), start, end)
      at = text.indexOf('@', end)
    } else {
      at = text.indexOf('@', at + 1)
    }
  }
}

function validDomain (text: string, from: number, to: number): boolean {
  const labels = text.slice(from, to).split('.')
  if (labels.length < 2) return false
  for (const label of labels) {
    if (label.length === 0 || label.length > 63 || label.startsWith('-') || label.endsWith('-')) return false
  }
  const tld = labels[labels.length - 1] ?? ''
  return tld.length >= 2 && /^[A-Za-z]+$/.test(tld)
}

// ---- payment card --------------------------------------------------------------------------------

const CARD = /\d(?:[ -]?\d){12,18}/g

function findCards (text: string, add: Add): void {
  CARD.lastIndex = 0
  let m: RegExpExecArray | null
  while ((m = CARD.exec(text)) !== null) {
    const start = m.index
    let end = start + m[0].length
    // Part of a longer number (or a grouped run going on): skip the whole run.
    if (start > 0 && isDigit(text.charCodeAt(start - 1))) continue
    if (end < text.length && isDigit(text.charCodeAt(end))) {
      while (end < text.length && (isDigit(text.charCodeAt(end)) || text[end] === ' ' || text[end] === '-')) end++
      CARD.lastIndex = end
      continue
    }
    const hit = bestCard(m[0])
    if (hit === undefined) continue
    add('payment_card', 'high', `card ending ${hit.digits.slice(-4)} (${hit.brand})`, start, start + hit.length)
  }
}

/**
 * The whole candidate, or a shorter prefix that ends on a group boundary ("… 4242 cvv 123"). Cards are
 * written ungrouped or in groups of 4–6 digits (4-4-4-4, 4-6-5, 4-4-4-4-3), never "1 2 3 4 …".
 */
function bestCard (raw: string): { digits: string, brand: string, length: number } | undefined {
  const groups = raw.split(/[ -]/)
  let last = 0
  while (last < groups.length - 1 && isGroup(groups[last])) last++
  for (let k = last; k >= 0; k--) {
    const digits = groups.slice(0, k + 1).join('')
    if (digits.length < 13) return undefined
    const brand = cardBrand(digits)
    // k separators between the k + 1 groups.
    if (brand !== undefined && luhn(digits)) return { digits, brand, length: digits.length + k }
  }
  return undefined
}

const isGroup = (group: string | undefined): boolean => group !== undefined && group.length >= 4 && group.length <= 6

export function luhn (digits: string): boolean {
  let sum = 0
  let double = false
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48
    if (double) {
      d *= 2
      if (d > 9) d -= 9
    }
    sum += d
    double = !double
  }
  return sum % 10 === 0
}

/** Issuer by IIN prefix and length; undefined for a number no network issues. */
function cardBrand (d: string): string | undefined {
  const n = d.length
  const p2 = Number(d.slice(0, 2))
  const p3 = Number(d.slice(0, 3))
  const p4 = Number(d.slice(0, 4))
  if (d[0] === '4') return n === 13 || n === 16 || n === 19 ? 'visa' : undefined
  if ((p2 === 34 || p2 === 37) && n === 15) return 'amex'
  if (((p2 >= 51 && p2 <= 55) || (p4 >= 2221 && p4 <= 2720)) && n === 16) return 'mastercard'
  if (p4 >= 2200 && p4 <= 2204 && n === 16) return 'mir'
  if ((p4 === 6011 || (p3 >= 644 && p3 <= 649) || p2 === 65) && n >= 16) return 'discover'
  if (p4 >= 3528 && p4 <= 3589 && n >= 16) return 'jcb'
  if (((p3 >= 300 && p3 <= 305) || p2 === 36 || p2 === 38 || p2 === 39) && n >= 14) return 'diners'
  if (p2 === 62 && n >= 16) return 'unionpay'
  if ((p2 === 50 || (p2 >= 56 && p2 <= 69)) && n >= 13) return 'maestro'
  return undefined
}

// ---- IBAN ----------------------------------------------------------------------------------------

// IBAN length per country, from the SWIFT IBAN registry.
const IBAN_LENGTH: Readonly<Record<string, number>> = {
  AD: 24, AE: 23, AL: 28, AT: 20, AZ: 28, BA: 20, BE: 16, BG: 22, BH: 22, BI: 27, BR: 29, BY: 28,
  CH: 21, CR: 22, CY: 28, CZ: 24, DE: 22, DJ: 27, DK: 18, DO: 28, EE: 20, EG: 29, ES: 24, FI: 18,
  FK: 18, FO: 18, FR: 27, GB: 22, GE: 22, GI: 23, GL: 18, GR: 27, GT: 28, HR: 21, HU: 28, IE: 22,
  IL: 23, IQ: 23, IS: 26, IT: 27, JO: 30, KW: 30, KZ: 20, LB: 28, LC: 32, LI: 21, LT: 20, LU: 20,
  LV: 21, LY: 25, MC: 27, MD: 24, ME: 22, MK: 19, MN: 20, MR: 27, MT: 31, MU: 30, NI: 28, NL: 18,
  NO: 15, OM: 23, PK: 24, PL: 28, PS: 29, PT: 25, QA: 29, RO: 24, RS: 22, RU: 33, SA: 24, SC: 31,
  SD: 18, SE: 24, SI: 19, SK: 24, SM: 27, SO: 23, ST: 25, SV: 28, TL: 23, TN: 24, TR: 26, UA: 29,
  VA: 22, VG: 24, XK: 20, YE: 30
}

const IBAN_START = /[A-Z]{2}\d{2}/g
const isUpperAlnum = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 65 && c <= 90)

function findIbans (text: string, add: Add): void {
  IBAN_START.lastIndex = 0
  let m: RegExpExecArray | null
  while ((m = IBAN_START.exec(text)) !== null) {
    const start = m.index
    const want = IBAN_LENGTH[m[0].slice(0, 2)]
    if (want === undefined || (start > 0 && isAlnum(text.charCodeAt(start - 1)))) continue
    // Collect `want` characters, allowing single spaces between them (printed in groups of four).
    let compact = m[0]
    let end = start + 4
    while (compact.length < want && end < text.length) {
      let c = text.charCodeAt(end)
      if (c === 32 && end + 1 < text.length) c = text.charCodeAt(++end)
      if (!isUpperAlnum(c)) break
      compact += text[end]
      end++
    }
    if (compact.length !== want || (end < text.length && isAlnum(text.charCodeAt(end)))) continue
    if (!mod97(compact)) continue
    add('iban', 'high', `IBAN ${compact.slice(0, 2)}** **** ${compact.slice(-4)}`, start, end)
    IBAN_START.lastIndex = end
  }
}

/** ISO 13616 check: move the first four characters to the end, letters to 10..35, mod 97 is 1. */
export function mod97 (iban: string): boolean {
  const s = iban.slice(4) + iban.slice(0, 4)
  let r = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    r = c <= 57 ? (r * 10 + (c - 48)) % 97 : (r * 100 + (c - 55)) % 97
  }
  return r === 1
}

// ---- US SSN --------------------------------------------------------------------------------------

const SSN = /\d{3}([- ]?)\d{2}\1\d{4}/g
// Numbers published as examples (Woolworth's wallet card, an ad), never valid for a person.
const FAKE_SSN = new Set(['078051120', '219099999'])
// Without dashes, nine digits are just a number unless the words right before say it is an SSN.
const SSN_CONTEXT = /\b(?:ssn|social security(?: number)?|ss#|ss no)[^\d\n]{0,12}$/i

function findSsns (text: string, add: Add): void {
  SSN.lastIndex = 0
  let m: RegExpExecArray | null
  while ((m = SSN.exec(text)) !== null) {
    const start = m.index
    const end = start + m[0].length
    if (!standalone(text, start, end)) continue
    const d = digitsOf(m[0])
    const area = Number(d.slice(0, 3))
    if (area === 0 || area === 666 || area >= 900) continue
    if (d.slice(3, 5) === '00' || d.slice(5) === '0000' || FAKE_SSN.has(d)) continue
    if (m[1] !== '-' && !SSN_CONTEXT.test(text.slice(Math.max(0, start - 40), start))) continue
    add('us_ssn', 'high', `SSN ***-**-${d.slice(5)}`, start, end)
  }
}

/** Not part of a longer number or dashed code such as a UUID or a phone number. */
function standalone (text: string, start: number, end: number): boolean {
  const before = start > 0 ? text.charCodeAt(start - 1) : 32
  const after = end < text.length ? text.charCodeAt(end) : 32
  if (isAlnum(before) || isAlnum(after) || before === 45 || after === 45) return false
  return true
}

// ---- phone ---------------------------------------------------------------------------------------

// Prefilter: only shapes a phone found with a default region of US can take, an international number
// (`+` and 7–15 digits) or a 10-digit US number in its usual groupings. libphonenumber's own matcher is
// far too slow for a whole prompt, so it only sees these short windows.
const PHONE_SHAPE = /\+\d[\d ().\-/\u00A0]{5,24}\d|(?:1[ .-]?)?\(?\d{3}\)?[ .\-\u00A0]?\d{3}[ .\-\u00A0]?\d{4}/g
// A bare run of digits ("order 4155552671") is only a phone if the words right before say so.
const PHONE_CONTEXT = /\b(?:phone|tel|call|mobile|cell|fax|whatsapp|sms|text me|contact|dial)[^\d\n]{0,12}$/i

function findPhones (text: string, found: readonly Issue[], add: Add): void {
  PHONE_SHAPE.lastIndex = 0
  let m: RegExpExecArray | null
  while ((m = PHONE_SHAPE.exec(text)) !== null) {
    const runStart = m.index
    const runEnd = runStart + m[0].length
    // Digits glued on either side: part of a longer number.
    if ((runStart > 0 && isDigit(text.charCodeAt(runStart - 1))) || (runEnd < text.length && isDigit(text.charCodeAt(runEnd)))) continue
    const digits = digitsOf(m[0]).length
    if (digits < 7 || digits > 16) continue
    // One character of context each side: the matcher rejects numbers glued to letters.
    const from = Math.max(0, runStart - 1)
    const window = text.slice(from, Math.min(text.length, runEnd + 1))
    for (const hit of findPhoneNumbersInText(window, { defaultCountry: 'US' })) {
      const start = from + hit.startsAt
      const end = from + hit.endsAt
      if (overlaps(found, start, end)) continue
      if (/^\d+$/.test(text.slice(start, end)) && !PHONE_CONTEXT.test(text.slice(Math.max(0, start - 40), start))) continue
      const national = hit.number.nationalNumber
      const country = hit.number.country === undefined ? '' : ` (${hit.number.country})`
      add('phone', 'low', `+${hit.number.countryCallingCode} *** *** ${national.slice(-4)}${country}`, start, end)
    }
  }
}

function overlaps (found: readonly Issue[], start: number, end: number): boolean {
  for (const issue of found) {
    if (start < issue.span[1] && issue.span[0] < end) return true
  }
  return false
}
