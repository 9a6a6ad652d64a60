// The one way this console builds DOM. Sandboxes control many of the strings shown here (file
// names, command lines, metadata, audit details), so text only ever goes in through
// textContent / text nodes, attribute names only ever come from this code, and URL-bearing
// attributes only take values this console made itself.

// Attribute names are literals in our own code, but a slip (say, spreading an API object into
// props) must fail loudly rather than set `onclick` or `style` from data.
const ATTR_NAME = /^(?:[a-z][a-z0-9]*(?:-[a-z0-9]+)*)$/
const FORBIDDEN_ATTRS = new Set(['style', 'srcdoc', 'formaction', 'action', 'xlink:href'])
const URL_ATTRS = new Set(['href', 'src'])

// Links inside the console (#/…), object URLs we created, and http(s) URLs that the caller
// has already decided to make clickable (preview ports). Never javascript:, data: or others.
export function isSafeUrl(value) {
  const s = String(value)
  if (s.startsWith('#/')) return true
  if (s.startsWith('blob:' + location.origin + '/')) return true
  if (/^https?:\/\//i.test(s)) {
    try {
      const u = new URL(s)
      return u.protocol === 'http:' || u.protocol === 'https:'
    } catch {
      return false
    }
  }
  return false
}

function setAttr(node, name, value) {
  if (!ATTR_NAME.test(name) || name.startsWith('on') || FORBIDDEN_ATTRS.has(name)) {
    throw new Error('refusing to set attribute ' + JSON.stringify(name))
  }
  if (URL_ATTRS.has(name) && !isSafeUrl(value)) throw new Error('refusing an unsafe URL for ' + name)
  node.setAttribute(name, value === true ? '' : String(value))
}

function appendChildren(node, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue
    if (Array.isArray(c)) appendChildren(node, c)
    else if (c instanceof Node) node.appendChild(c)
    else node.appendChild(document.createTextNode(String(c)))
  }
}

// el('button', {class: 'x', testid: 'y', on: {click: fn}}, 'text', child, [more])
// Special props: text (textContent), testid (data-testid), on (event listeners). Falsy
// values (null, undefined, false) leave the attribute out, so `disabled: cond` works.
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag)
  for (const [name, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue
    if (name === 'text') node.textContent = String(value)
    else if (name === 'testid') node.setAttribute('data-testid', String(value))
    else if (name === 'on') {
      for (const [event, fn] of Object.entries(value)) node.addEventListener(event, fn)
    } else setAttr(node, name, value)
  }
  appendChildren(node, children)
  return node
}

// Replaces every child of `node` (never by assigning markup).
export function replaceChildren(node, ...children) {
  while (node.firstChild) node.removeChild(node.firstChild)
  appendChildren(node, children)
  return node
}

// Sets text only when it changed, so live refreshes do not disturb screen readers or selection.
export function setText(node, text) {
  const s = String(text)
  if (node.textContent !== s) node.textContent = s
}

let nextId = 0
// Unique element ids for <label for> and aria-* references.
export function uid(prefix) {
  nextId += 1
  return prefix + '-' + nextId
}

// A labelled form control: returns {wrap, input}; the label is visible text.
export function field(labelText, control, hint) {
  if (!control.id) control.id = uid('f')
  const label = el('label', { for: control.id, text: labelText })
  let hintEl = null
  if (hint) {
    hintEl = el('span', { class: 'hint', id: uid('hint'), text: hint })
    control.setAttribute('aria-describedby', hintEl.id)
  }
  return { wrap: el('div', { class: 'field' }, label, control, hintEl), input: control, label }
}

export function button(text, props = {}) {
  return el('button', { type: 'button', ...props }, text)
}

// A table with a caption and column headers; returns {table, tbody}.
export function table(caption, columns, props = {}) {
  const tbody = el('tbody')
  const tableEl = el(
    'table',
    props,
    el('caption', { text: caption }),
    el('thead', {}, el('tr', {}, columns.map((c) => el('th', { scope: 'col', text: c })))),
    tbody,
  )
  return { table: tableEl, tbody }
}

// A row that spans every column, for "nothing here" and "loading" messages.
export function messageRow(columns, text) {
  return el('tr', { class: 'empty' }, el('td', { colspan: columns, text }))
}
