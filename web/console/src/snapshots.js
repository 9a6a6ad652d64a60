// The Snapshots tab: take a snapshot, see the sandbox's snapshots as a tree (by parent
// links) with the sandboxes that currently sit on each one (this sandbox at its head, and its
// forks), fork or roll back from any node, and diff two nodes.
import { button, el, field, replaceChildren, setText, uid } from './dom.js'
import { request, enc, describeError } from './api.js'
import { showError, showStatus } from './notice.js'
import { bytes, str, time } from './format.js'
import { sandboxLink } from './links.js'
import { listAllSandboxes } from './sandboxes.js'

const CONFIRM_MS = 8000
const DIFF_SHOWN = 2000 // paths per list; the API truncates long diffs itself too

function byCreated(a, b) {
  return str(a.created_at).localeCompare(str(b.created_at)) || str(a.id).localeCompare(str(b.id))
}

export function mountSnapshots(panel, scope, ctx) {
  const id = ctx.id
  const label = el('input', { type: 'text', testid: 'snapshot-label', name: 'label', maxlength: '256', autocomplete: 'off' })
  const takeButton = el('button', { type: 'submit', class: 'primary', testid: 'take-snapshot' }, 'Take snapshot')
  const takeForm = el(
    'form',
    { class: 'inline-form', 'aria-label': 'Take a snapshot' },
    field('Label (optional)', label).wrap,
    takeButton,
  )
  const refreshButton = button('Refresh', { testid: 'snapshot-refresh' })
  const diffButton = button('Diff the two picked snapshots', { testid: 'diff-snapshot', disabled: true })
  const result = el('p', { class: 'result', role: 'status', 'aria-live': 'polite', testid: 'snapshot-result' })
  const treeBox = el('div', { testid: 'snapshot-tree', class: 'snapshot-tree' })
  const diffResult = el('section', { testid: 'diff-result', class: 'diff-result', 'aria-label': 'Diff result', 'aria-live': 'polite' })

  replaceChildren(
    panel,
    el('h2', { text: 'Snapshots' }),
    el('div', { class: 'toolbar wrap' }, takeForm, refreshButton),
    result,
    treeBox,
    el('div', { class: 'toolbar' }, diffButton, el('span', { class: 'hint', text: 'Tick “Compare” on two snapshots.' })),
    diffResult,
  )

  let snapshots = []
  let sandboxes = []
  const forks = new Map() // snapshot id → sandboxes forked from it here (until the list shows them)
  let picked = [] // at most two snapshot ids, oldest pick first
  const armed = new Set() // snapshot ids whose rollback button awaits its second click

  function updateDiffButton() {
    diffButton.disabled = picked.length !== 2
  }

  function sandboxesAt(sid) {
    const out = new Map()
    for (const s of sandboxes) if (s.head_snapshot === sid && s.state !== 'destroyed') out.set(s.id, s)
    for (const s of forks.get(sid) || []) if (!out.has(s.id)) out.set(s.id, s)
    return [...out.values()].sort((a, b) => (a.id === id ? -1 : b.id === id ? 1 : byCreated(a, b)))
  }

  function nodeFor(snap, childrenOf, seen, nodes) {
    const sid = str(snap.id)
    const kids = (childrenOf.get(sid) || []).filter((c) => !seen.has(c.id))
    for (const c of kids) seen.add(c.id)
    const pick = el('input', { type: 'checkbox', testid: 'diff-pick', 'data-snapshot-id': sid, checked: picked.includes(sid) })
    pick.id = uid('pick')
    pick.addEventListener('change', () => {
      picked = picked.filter((p) => p !== sid)
      if (pick.checked) picked.push(sid)
      // Keep the two latest picks, so a third tick replaces the oldest.
      while (picked.length > 2) picked.shift()
      for (const [otherSid, n] of nodes) n.pick.checked = picked.includes(otherSid)
      updateDiffButton()
    })
    const fork = button('Fork', {
      class: 'small',
      testid: 'fork-snapshot',
      'data-snapshot-id': sid,
      'aria-label': 'Fork from ' + sid,
      on: { click: () => doFork(sid, fork) },
    })
    const rollback = button(armed.has(sid) ? 'Really roll back?' : 'Roll back', {
      class: 'small danger',
      testid: 'rollback-snapshot',
      'data-snapshot-id': sid,
      'data-confirm': armed.has(sid) ? 'true' : null,
      on: { click: () => doRollback(sid, rollback), keydown: (e) => e.key === 'Escape' && disarm(sid, rollback) },
    })
    const here = sandboxesAt(sid)
    const facts = [str(snap.kind), str(snap.state), bytes(snap.size_bytes), time(snap.created_at)].filter(Boolean).join(' · ')
    const parentNote = snap.parent && !snapshots.some((s) => s.id === snap.parent)
      ? el('span', { class: 'hint', text: ' (parent ' + str(snap.parent) + ')' })
      : null
    const li = el(
      'li',
      {
        role: 'treeitem',
        testid: 'snapshot-node',
        'data-snapshot-id': sid,
        'aria-label': 'Snapshot ' + sid + (snap.label ? ' ' + str(snap.label) : ''),
        'aria-expanded': kids.length ? 'true' : null,
      },
      el(
        'div',
        { class: 'node' },
        el('span', { class: 'check' }, pick, el('label', { for: pick.id }, 'Compare', el('span', { class: 'visually-hidden', text: ' ' + sid }))),
        el('span', { class: 'mono node-id', text: sid }),
        snap.label ? el('span', { class: 'node-label', testid: 'snapshot-label-text', text: str(snap.label) }) : null,
        el('span', { class: 'hint', text: facts }),
        parentNote,
        el('span', { class: 'actions' }, fork, rollback),
      ),
      here.length
        ? el(
            'ul',
            { class: 'heads', 'aria-label': 'Sandboxes at ' + sid },
            here.map((s) =>
              el(
                'li',
                { testid: 'snapshot-sandbox', 'data-sandbox-id': str(s.id) },
                sandboxLink(str(s.id), 'snapshots'),
                ' ',
                el('span', { class: 'hint', text: (s.id === id ? 'this sandbox' : 'fork') + ', ' + str(s.state) }),
              ),
            ),
          )
        : null,
    )
    nodes.set(sid, { li, pick, fork, rollback })
    if (kids.length) {
      li.appendChild(el('ul', { role: 'group' }, kids.map((k) => nodeFor(k, childrenOf, seen, nodes))))
    }
    return li
  }

  let nodes = new Map()
  function render() {
    // Re-rendering replaces the buttons: remember which one had focus to give it back.
    const active = document.activeElement
    let refocus = null
    for (const [sid, n] of nodes) {
      for (const k of ['pick', 'fork', 'rollback']) if (n[k] === active) refocus = [sid, k]
    }
    const known = new Set(snapshots.map((s) => s.id))
    picked = picked.filter((p) => known.has(p))
    updateDiffButton()
    const childrenOf = new Map()
    const roots = []
    for (const s of [...snapshots].sort(byCreated)) {
      if (s.parent && known.has(s.parent) && s.parent !== s.id) {
        if (!childrenOf.has(s.parent)) childrenOf.set(s.parent, [])
        childrenOf.get(s.parent).push(s)
      } else roots.push(s)
    }
    nodes = new Map()
    const seen = new Set(roots.map((r) => r.id))
    if (snapshots.length === 0) {
      replaceChildren(treeBox, el('p', { class: 'hint', text: 'No snapshots yet.' }))
      return
    }
    const tree = el('ul', { role: 'tree', class: 'tree', 'aria-label': 'Snapshots of ' + id }, roots.map((r) => nodeFor(r, childrenOf, seen, nodes)))
    // Cycles in parent links (should not happen) would leave nodes unreached: show them as roots.
    for (const s of snapshots) if (!seen.has(s.id)) { seen.add(s.id); tree.appendChild(nodeFor(s, childrenOf, seen, nodes)) }
    replaceChildren(treeBox, tree)
    if (refocus && nodes.has(refocus[0])) nodes.get(refocus[0])[refocus[1]].focus()
  }

  let seq = 0
  async function load() {
    const mine = ++seq
    try {
      const [snaps, all] = await Promise.all([
        request('/v1/sandboxes/' + enc(id) + '/snapshots', { signal: scope.signal }),
        listAllSandboxes(scope.signal),
      ])
      if (mine !== seq) return
      snapshots = ((snaps && snaps.snapshots) || []).filter((s) => s && s.id)
      sandboxes = all
      for (const [sid, list] of forks) {
        const left = list.filter((f) => !all.some((s) => s.id === f.id && s.head_snapshot === sid))
        if (left.length) forks.set(sid, left)
        else forks.delete(sid)
      }
      render()
    } catch (err) {
      if (scope.disposed || mine !== seq) return
      showError('Could not list the snapshots of ' + id, err)
    }
  }

  takeForm.addEventListener('submit', async (e) => {
    e.preventDefault()
    takeButton.disabled = true
    setText(result, 'Taking a snapshot…')
    try {
      const body = label.value.trim() ? { label: label.value.trim() } : {}
      const snap = await request('/v1/sandboxes/' + enc(id) + '/snapshots', { method: 'POST', json: body, signal: scope.signal })
      label.value = ''
      setText(result, 'Took snapshot ' + str(snap && snap.id) + '.')
      showStatus('Took snapshot ' + str(snap && snap.id) + ' of ' + id + '.')
      await load()
    } catch (err) {
      if (scope.disposed) return
      setText(result, describeError('Could not take a snapshot', err))
      showError('Could not take a snapshot of ' + id, err)
    } finally {
      takeButton.disabled = false
    }
  })

  async function doFork(sid, btn) {
    btn.disabled = true
    btn.textContent = 'Forking…'
    setText(result, 'Forking from ' + sid + '…')
    try {
      const body = await request('/v1/sandboxes/' + enc(id) + '/fork?wait=true', {
        method: 'POST',
        json: { snapshot: sid },
        signal: scope.signal,
      })
      const made = ((body && body.sandboxes) || []).filter((s) => s && s.id)
      forks.set(sid, [...(forks.get(sid) || []), ...made])
      replaceChildren(
        result,
        made.length ? ['Forked ', made.map((s, i) => [i ? ', ' : '', sandboxLink(str(s.id), 'terminal')]), ' from ' + sid + '.'] : 'Fork returned no sandbox.',
      )
      showStatus('Forked ' + made.map((s) => s.id).join(', ') + ' from ' + sid + '.')
      await load()
    } catch (err) {
      if (scope.disposed) return
      setText(result, describeError('Could not fork from ' + sid, err))
      showError('Could not fork from ' + sid, err)
      render()
    }
  }

  const timers = new Map()
  function disarm(sid, btn) {
    armed.delete(sid)
    clearTimeout(timers.get(sid))
    timers.delete(sid)
    if (btn) {
      btn.textContent = 'Roll back'
      btn.removeAttribute('data-confirm')
    }
  }
  scope.onDispose(() => timers.forEach((t) => clearTimeout(t)))

  // Two clicks, in the page: rolling back throws away everything since that snapshot.
  async function doRollback(sid, btn) {
    if (!armed.has(sid)) {
      armed.add(sid)
      btn.textContent = 'Really roll back?'
      btn.setAttribute('data-confirm', 'true')
      timers.set(sid, setTimeout(() => disarm(sid, nodes.has(sid) ? nodes.get(sid).rollback : null), CONFIRM_MS))
      return
    }
    disarm(sid, btn)
    btn.disabled = true
    btn.textContent = 'Rolling back…'
    setText(result, 'Rolling ' + id + ' back to ' + sid + '…')
    try {
      await request('/v1/sandboxes/' + enc(id) + '/rollback', { method: 'POST', json: { snapshot: sid }, signal: scope.signal })
      setText(result, 'Rolled ' + id + ' back to ' + sid + '.')
      showStatus('Rolled ' + id + ' back to ' + sid + '.')
      await load()
    } catch (err) {
      if (scope.disposed) return
      setText(result, describeError('Could not roll back to ' + sid, err))
      showError('Could not roll ' + id + ' back to ' + sid, err)
      render()
    }
  }

  function list(title, paths, testid) {
    const items = (Array.isArray(paths) ? paths : []).map(str)
    return el(
      'div',
      { class: 'diff-list', testid },
      el('h3', { text: title + ' (' + items.length + ')' }),
      items.length
        ? el('ul', { class: 'mono' }, items.slice(0, DIFF_SHOWN).map((p) => el('li', { text: p })))
        : el('p', { class: 'hint', text: 'none' }),
      items.length > DIFF_SHOWN ? el('p', { class: 'hint', text: 'and ' + (items.length - DIFF_SHOWN) + ' more' }) : null,
    )
  }

  diffButton.addEventListener('click', async () => {
    if (picked.length !== 2) return
    // Diff the newer against the older, so "added" means added since the older one.
    const [older, newer] = picked
      .map((sid) => snapshots.find((s) => s.id === sid) || { id: sid })
      .sort(byCreated)
      .map((s) => s.id)
    replaceChildren(diffResult, el('p', { text: 'Comparing ' + newer + ' with ' + older + '…' }))
    try {
      const d = await request('/v1/snapshots/' + enc(newer) + '/diff?against=' + enc(older), { signal: scope.signal })
      replaceChildren(
        diffResult,
        el('h3', { text: 'Changes from ' + older + ' to ' + newer }),
        list('Added', d && d.added, 'diff-added'),
        list('Changed', d && d.changed, 'diff-changed'),
        list('Removed', d && d.removed, 'diff-removed'),
        d && d.truncated ? el('p', { class: 'hint', text: 'The server truncated this diff: there are more changes.' }) : null,
      )
    } catch (err) {
      if (scope.disposed) return
      replaceChildren(diffResult, el('p', { text: describeError('Could not diff ' + newer + ' with ' + older, err) }))
      showError('Could not diff ' + newer + ' with ' + older, err)
    }
  })

  refreshButton.addEventListener('click', () => load())

  return {
    show() {
      load()
    },
  }
}
