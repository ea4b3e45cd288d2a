// Deterministic key-like strings, built at run time rather than written out so no real-looking key
// sits in the repository for secret scanners to trip on.

/** `n` characters of `alphabet`, from a linear congruential sequence started at `seed`. */
export function token (n: number, alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789', seed = 7): string {
  let s = ''
  let x = seed
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648
    s += alphabet[x % alphabet.length]
  }
  return s
}
