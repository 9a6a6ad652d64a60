// Links to console views. Ids go through encodeURIComponent so an odd id can only ever be
// part of the hash path, and the href always starts with "#/" (which dom.js insists on).
import { el } from './dom.js'
import { enc } from './api.js'

export function sandboxLink(id, tab = 'terminal', text = id) {
  return el('a', { href: '#/sandboxes/' + enc(id) + '/' + tab, class: 'mono', text })
}
