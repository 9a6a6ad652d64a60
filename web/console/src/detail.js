// #/sandboxes/<id>/<tab>: the sandbox's header (live state, lifecycle buttons) and its tabs.
// A panel is built the first time its tab is shown and then only hidden, so an open terminal
// keeps its session while you look at files or snapshots; each panel starts and stops its own
// refresh timers in show()/hide().
import { button, el, replaceChildren, setText } from './dom.js'
import { request, enc } from './api.js'
import { showError } from './notice.js'
import { setBadge, stateBadge, str, time } from './format.js'
import { lifecycleButtons } from './lifecycle.js'
import { mountTerminal } from './terminal.js'
import { mountFiles } from './files.js'
import { mountSnapshots } from './snapshots.js'
import { mountActivity } from './activity.js'
import { mountPorts } from './ports.js'

const REFRESH_MS = 3000

export const TABS = [
  { name: 'terminal', label: 'Terminal', mount: mountTerminal },
  { name: 'files', label: 'Files', mount: mountFiles },
  { name: 'snapshots', label: 'Snapshots', mount: mountSnapshots },
  { name: 'activity', label: 'Activity', mount: mountActivity },
  { name: 'ports', label: 'Ports', mount: mountPorts },
]

export function mountDetail(root, scope, id, initialTab) {
  const h1 = el('h1', { tabindex: '-1' }, 'Sandbox ', el('span', { class: 'mono', text: id }))
  const badge = stateBadge('')
  const values = {
    template: el('dd', { testid: 'detail-template' }),
    runtime: el('dd', { testid: 'detail-runtime' }),
    created: el('dd', { testid: 'detail-created' }),
    expires: el('dd', { testid: 'detail-expires' }),
    egress: el('dd', { testid: 'detail-egress' }),
    metadata: el('dd', { testid: 'detail-metadata' }),
  }
  const info = el(
    'dl',
    { class: 'facts' },
    el('div', {}, el('dt', { text: 'State' }), el('dd', { testid: 'detail-state' }, badge)),
    el('div', {}, el('dt', { text: 'Template' }), values.template),
    el('div', {}, el('dt', { text: 'Runtime' }), values.runtime),
    el('div', {}, el('dt', { text: 'Created' }), values.created),
    el('div', {}, el('dt', { text: 'Expires' }), values.expires),
    el('div', {}, el('dt', { text: 'Egress' }), values.egress),
    el('div', {}, el('dt', { text: 'Metadata' }), values.metadata),
  )
  const actionsSlot = el('div', { class: 'detail-actions' })
  let actions = null
  let sandbox = null

  const tablist = el('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Sandbox ' + id })
  const panelsEl = el('div', { class: 'panels' })
  const tabs = new Map()
  for (const t of TABS) {
    const tabButton = button(t.label, {
      role: 'tab',
      id: 'tab-' + t.name,
      testid: 'tab-' + t.name,
      'aria-controls': 'panel-' + t.name,
      'aria-selected': 'false',
    })
    const panel = el('section', {
      class: 'tabpanel',
      role: 'tabpanel',
      id: 'panel-' + t.name,
      'aria-labelledby': 'tab-' + t.name,
      hidden: true,
    })
    tabButton.addEventListener('click', () => go(t.name))
    tabButton.addEventListener('keydown', (e) => onTabKey(e, t.name))
    tablist.appendChild(tabButton)
    panelsEl.appendChild(panel)
    tabs.set(t.name, { def: t, button: tabButton, panel, instance: null, scope: null })
  }

  replaceChildren(
    root,
    el('div', { class: 'crumbs' }, el('a', { href: '#/sandboxes', text: '← All sandboxes' })),
    el('div', { class: 'detail-head' }, h1, actionsSlot),
    info,
    tablist,
    panelsEl,
  )

  function go(name) {
    const target = '#/sandboxes/' + enc(id) + '/' + name
    if (location.hash !== target) location.hash = target
    else setTab(name)
  }

  // Arrow keys move between tabs as well as Tab does: every tab stays in the tab order (the
  // keyboard flow must reach any of them), the arrows are the usual tablist shortcut.
  function onTabKey(e, name) {
    const names = TABS.map((t) => t.name)
    let i = names.indexOf(name)
    if (e.key === 'ArrowRight') i = (i + 1) % names.length
    else if (e.key === 'ArrowLeft') i = (i - 1 + names.length) % names.length
    else if (e.key === 'Home') i = 0
    else if (e.key === 'End') i = names.length - 1
    else return
    e.preventDefault()
    tabs.get(names[i]).button.focus()
    go(names[i])
  }

  let current = null
  function setTab(name) {
    if (!tabs.has(name)) name = 'terminal'
    if (current === name) return
    if (current) {
      const old = tabs.get(current)
      old.button.setAttribute('aria-selected', 'false')
      old.button.classList.remove('selected')
      old.panel.hidden = true
      if (old.instance && old.instance.hide) old.instance.hide()
    }
    current = name
    const t = tabs.get(name)
    t.button.setAttribute('aria-selected', 'true')
    t.button.classList.add('selected')
    t.panel.hidden = false
    if (!t.instance) {
      t.scope = scope.child()
      t.instance = t.def.mount(t.panel, t.scope, { id, sandbox: () => sandbox }) || {}
    }
    if (t.instance.show) t.instance.show()
  }

  function draw(s) {
    sandbox = s
    setBadge(badge, s.state)
    setText(values.template, str(s.template) + (s.template_digest ? ' (' + String(s.template_digest).slice(0, 19) + '…)' : ''))
    setText(values.runtime, str(s.runtime))
    setText(values.created, time(s.created_at))
    setText(values.expires, time(s.expires_at))
    const profiles = Array.isArray(s.egress_profiles) ? s.egress_profiles.map(String) : []
    setText(values.egress, profiles.length ? profiles.join(', ') : 'none (no network egress)')
    const meta = s.metadata && typeof s.metadata === 'object' ? Object.keys(s.metadata).sort() : []
    setText(values.metadata, meta.map((k) => k + '=' + String(s.metadata[k])).join(', ') || '—')
    if (!actions) {
      actions = lifecycleButtons(s, refresh, scope.signal)
      actionsSlot.appendChild(actions.el)
      scope.onDispose(() => actions.dispose())
    } else actions.update(s)
  }

  let failing = false
  async function refresh() {
    try {
      const s = await request('/v1/sandboxes/' + enc(id), { signal: scope.signal })
      if (failing) showError('')
      failing = false
      draw(s)
    } catch (err) {
      if (scope.disposed) return
      failing = true
      showError('Could not load sandbox ' + id, err)
    }
  }
  scope.poll(refresh, REFRESH_MS)
  setTab(initialTab)
  return { h1, setTab }
}
