// Small JSON helpers for reading provider bodies of unknown shape (the providers' own, re-exported under
// the UI's short names), and a re-indenter for the raw view.
export { asArray as arr, asObject as obj, asString as str, show, type Json } from './providers/json.js'

export function parse (text: string): { ok: true, value: unknown } | { ok: false } {
  try { return { ok: true, value: JSON.parse(text) } } catch { return { ok: false } }
}

/**
 * Indents JSON text without parsing it into values, so what is shown is what was sent: 64-bit
 * integers, number spellings and escapes stay as they are. Null when the text is not valid JSON
 * (a truncated capture), which the caller then shows as it is.
 */
export function prettyJson (src: string): string | null {
  if (!parse(src).ok) return null
  const out: string[] = []
  let depth = 0
  let i = 0
  const n = src.length
  const nl = (): void => { out.push('\n', '  '.repeat(depth)) }
  while (i < n) {
    const c = src[i]!
    if (c === '"') {
      // Copy the whole string: find its closing quote, skipping escaped characters.
      let j = i + 1
      while (j < n && src[j] !== '"') j += src[j] === '\\' ? 2 : 1
      out.push(src.slice(i, j + 1))
      i = j + 1
      continue
    }
    if (c === '{' || c === '[') {
      let j = i + 1
      while (j < n && (src[j] === ' ' || src[j] === '\n' || src[j] === '\r' || src[j] === '\t')) j++
      if (src[j] === (c === '{' ? '}' : ']')) {
        out.push(c, src[j]!)
        i = j + 1
        continue
      }
      depth++
      out.push(c)
      nl()
    } else if (c === '}' || c === ']') {
      depth--
      nl()
      out.push(c)
    } else if (c === ',') {
      out.push(',')
      nl()
    } else if (c === ':') {
      out.push(': ')
    } else if (c !== ' ' && c !== '\n' && c !== '\r' && c !== '\t') {
      // A run of a number or literal.
      let j = i + 1
      while (j < n && !',:{}[]" \n\r\t'.includes(src[j]!)) j++
      out.push(src.slice(i, j))
      i = j
      continue
    }
    i++
  }
  return out.join('')
}
