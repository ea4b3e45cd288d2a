// Masking helpers for PII and secret findings. An Issue's detail is stored on the trace, so it must
// never hold a whole value: at most a fixed, public prefix and the last four characters.

/** The last `n` characters of a value, or fewer if the value is short (never the whole value). */
export function tail (value: string, n = 4): string {
  // A value of 8 characters or less would be half revealed by its last four; show less.
  const keep = value.length > 2 * n ? n : Math.floor(value.length / 3)
  return keep > 0 ? value.slice(value.length - keep) : ''
}

/** `j***@example.com`: the first character of the local part and the domain. */
export function maskEmail (email: string): string {
  const at = email.lastIndexOf('@')
  const first = at > 1 ? email[0] : ''
  return `${first}***${email.slice(at)}`
}

/** `openai key sk-…x9Qz`: a label, the provider's fixed prefix, and the last four characters. */
export function maskKey (label: string, prefix: string, value: string): string {
  return `${label} ${prefix}…${tail(value.slice(prefix.length))}`
}

/** Digits only, for masking grouped numbers. */
export function digitsOf (value: string): string {
  let out = ''
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c >= 48 && c <= 57) out += value[i]
  }
  return out
}
