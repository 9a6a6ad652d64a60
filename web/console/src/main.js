// The console's entry point: builds the page shell and routes on the location hash
// (#/login, #/sandboxes, #/sandboxes/<id>/<tab>, #/templates). Each view gets a scope that
// is disposed when the route leaves it, which stops its timers, sockets and fetches.
import { el, replaceChildren } from './dom.js'
import { getKey, clearKey, setUnauthenticatedHandler, describeError } from './api.js'
import { noticeArea, clearNotices } from './notice.js'
import { createScope } from './scope.js'
import { mountLogin } from './login.js'
import { mountSandboxes } from './sandboxes.js'
import { mountDetail, TABS } from './detail.js'
import { mountTemplates } from './templates.js'

const ID = /^[A-Za-z0-9_-]{1,100}$/
const TAB_NAMES = new Set(TABS.map((t) => t.name))

const app = document.getElementById('app')
const nav = document.getElementById('nav')
const logout = document.getElementById('logout')
const notices = noticeArea()
const viewRoot = el('div', { class: 'view', id: 'view' })
replaceChildren(app, notices, viewRoot)

let current = null // {kind, id, hash, scope, detail}
let loginMessage = ''

function parse(hash) {
  const raw = (hash || '').replace(/^#\/?/, '')
  let parts
  try {
    parts = raw.split('/').map(decodeURIComponent)
  } catch {
    return { kind: 'sandboxes' }
  }
  if (parts[0] === 'login') return { kind: 'login' }
  if (parts[0] === 'templates' && parts.length === 1) return { kind: 'templates' }
  if (parts[0] === 'sandboxes' && parts.length >= 2 && parts[1]) {
    if (!ID.test(parts[1])) return { kind: 'redirect', to: '#/sandboxes' }
    const tab = parts[2] || ''
    if (!TAB_NAMES.has(tab) || parts.length > 3) {
      return { kind: 'redirect', to: '#/sandboxes/' + encodeURIComponent(parts[1]) + '/terminal' }
    }
    return { kind: 'detail', id: parts[1], tab }
  }
  if (parts[0] === 'sandboxes' && parts.length === 1) return { kind: 'sandboxes' }
  return { kind: 'redirect', to: '#/sandboxes' }
}

function markNav(kind) {
  nav.hidden = !getKey()
  for (const a of nav.querySelectorAll('a[data-view]')) {
    const here = a.getAttribute('data-view') === (kind === 'detail' ? 'sandboxes' : kind)
    if (here) a.setAttribute('aria-current', 'page')
    else a.removeAttribute('aria-current')
  }
}

function route() {
  // Both a direct call and the hashchange it causes may arrive: draw each location once.
  if (current && current.hash === location.hash) return
  const r = parse(location.hash)
  if (r.kind === 'redirect') {
    location.replace(r.to)
    return
  }
  if (r.kind !== 'login' && !getKey()) {
    location.replace('#/login')
    return
  }
  if (current && current.kind === 'detail' && r.kind === 'detail' && current.id === r.id) {
    current.hash = location.hash
    current.detail.setTab(r.tab)
    return
  }
  if (current) current.scope.dispose()
  clearNotices()
  const scope = createScope()
  current = { kind: r.kind, id: r.id, hash: location.hash, scope, detail: null }
  markNav(r.kind)
  let heading
  if (r.kind === 'login') {
    const message = loginMessage
    loginMessage = ''
    heading = mountLogin(viewRoot, scope, { message, onLogin: () => (location.hash = '#/sandboxes') })
  } else if (r.kind === 'sandboxes') {
    heading = mountSandboxes(viewRoot, scope)
  } else if (r.kind === 'templates') {
    heading = mountTemplates(viewRoot, scope)
  } else {
    current.detail = mountDetail(viewRoot, scope, r.id, r.tab)
    heading = current.detail.h1
  }
  // Screen reader and keyboard users start at the new view's heading, not at the old focus.
  if (heading) heading.focus()
}

function forgetSession() {
  clearKey()
  // Terminal pids are not secrets, but they belong to the key's team: drop them too.
  try {
    for (let i = sessionStorage.length - 1; i >= 0; i--) {
      const k = sessionStorage.key(i)
      if (k && k.startsWith('space.')) sessionStorage.removeItem(k)
    }
  } catch {
    // No storage, nothing kept.
  }
}

setUnauthenticatedHandler((err) => {
  // The stored key stopped working (revoked, expired): back to the login view, saying why.
  forgetSession()
  loginMessage = describeError('The server refused this key', err)
  if (current) current.scope.dispose()
  current = null
  location.hash = '#/login'
  if (location.hash === '#/login') route()
})

logout.addEventListener('click', () => {
  forgetSession()
  if (current) current.scope.dispose()
  current = null
  if (location.hash === '#/login') route()
  else location.hash = '#/login'
})

window.addEventListener('hashchange', route)
if (!location.hash) location.replace(getKey() ? '#/sandboxes' : '#/login')
route()
