// Copy buttons: the async clipboard where the page may use it, else the text selected and copied the old
// way (plain http off localhost refuses the async clipboard).
import { h } from './dom.js'

/** Copies text; falls back to selecting `el`'s text where the clipboard API is not allowed. */
export async function copy (text: string, el: HTMLElement): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text)
    return true
  } catch {
    const range = document.createRange()
    range.selectNodeContents(el)
    const sel = getSelection()
    sel?.removeAllRanges()
    sel?.addRange(range)
    // execCommand is deprecated but is the only fallback where the async clipboard is refused.
    return document.execCommand('copy')
  }
}

/** A button that copies `text` (shown in `shown`) and says whether it worked. */
export function copyButton (text: () => string, shown: HTMLElement, attrs: Record<string, string> = {}, label = 'Copy'): HTMLButtonElement {
  const b = h('button', { type: 'button', class: 'copy', ...attrs }, label)
  b.addEventListener('click', () => {
    void copy(text(), shown).then((ok) => { b.textContent = ok ? 'Copied' : 'Select and copy' })
  })
  return b
}
