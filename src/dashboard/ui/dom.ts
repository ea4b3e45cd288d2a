// The one way the UI makes elements. Data only ever becomes text (textContent / text nodes): there is
// no path from a trace, a key name or an error message to HTML parsing.

export type Child = Node | string | number | null | undefined | false
export type Attrs = Record<string, string | number | boolean | null | undefined>

/** `h('td', { 'data-col': 'model' }, model)`: attributes are set as attributes, children appended as nodes or text. */
export function h<K extends keyof HTMLElementTagNameMap> (tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag)
  if (attrs != null) {
    for (const name in attrs) {
      const v = attrs[name]
      if (v === null || v === undefined || v === false) continue
      // Never an inline style or handler: CSP forbids the first, the second would be code from strings.
      if (name === 'style' || name.startsWith('on')) throw new Error(`attribute ${name} is not allowed`)
      el.setAttribute(name, v === true ? '' : String(v))
    }
  }
  append(el, children)
  return el
}

export function append (parent: Node, children: readonly Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue
    parent.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)))
  }
}

/** Replaces every child of `el`. */
export function replace (el: Element, ...children: Child[]): void {
  el.textContent = ''
  append(el, children)
}

export function byTestId<T extends Element = HTMLElement> (root: ParentNode, id: string): T {
  const el = root.querySelector<Element>(`[data-testid="${id}"]`)
  if (el === null) throw new Error(`missing [data-testid=${id}]`)
  return el as T
}

/** A select's options from [value, label] pairs. */
export function options (pairs: ReadonlyArray<readonly [string, string]>, selected?: string): HTMLOptionElement[] {
  return pairs.map(([value, label]) => h('option', { value, selected: value === selected }, label))
}
