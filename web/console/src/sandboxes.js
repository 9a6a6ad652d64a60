// #/sandboxes: the team's sandboxes, live (a refresh every 2 s), with row actions and the
// create form. Rows are kept by id and updated in place, so a refresh never moves keyboard
// focus or disarms a half-confirmed destroy.
import { button, el, messageRow, replaceChildren, setText, table } from './dom.js'
import { sandboxLink } from './links.js'
import { request, enc } from './api.js'
import { showError } from './notice.js'
import { age, metadataText, setBadge, stateBadge, str } from './format.js'
import { lifecycleButtons } from './lifecycle.js'
import { createForm } from './create.js'

const REFRESH_MS = 2000
const COLUMNS = ['ID', 'State', 'Template', 'Runtime', 'Age', 'Metadata', 'Actions']

// All of the team's sandboxes, following pages (the API returns at most 1000 at a time).
export async function listAllSandboxes(signal) {
  const out = []
  let token = ''
  for (let page = 0; page < 20; page++) {
    const q = '/v1/sandboxes?limit=1000' + (token ? '&page_token=' + enc(token) : '')
    const body = await request(q, { signal })
    for (const s of (body && body.sandboxes) || []) out.push(s)
    token = body && body.next_page_token
    if (!token) break
  }
  return out
}

export function mountSandboxes(root, scope) {
  const h1 = el('h1', { tabindex: '-1', text: 'Sandboxes' })
  const showDestroyed = el('input', { type: 'checkbox', id: 'show-destroyed', testid: 'show-destroyed' })
  const newButton = button('New sandbox', {
    class: 'primary',
    testid: 'new-sandbox',
    'aria-expanded': 'false',
    'aria-controls': 'create-panel',
  })
  const createPanel = el('section', { id: 'create-panel', class: 'panel', 'aria-label': 'New sandbox', hidden: true })
  const { table: tableEl, tbody } = table('Sandboxes of this team, refreshed every 2 seconds', COLUMNS, {
    testid: 'sandboxes-table',
    class: 'list',
  })
  const rows = new Map()
  let lastList = []
  let loaded = false

  replaceChildren(
    root,
    h1,
    el(
      'div',
      { class: 'toolbar' },
      newButton,
      el('span', { class: 'check' }, showDestroyed, el('label', { for: 'show-destroyed', text: 'Show destroyed' })),
    ),
    createPanel,
    el('div', { class: 'table-wrap' }, tableEl),
  )
  tbody.appendChild(messageRow(COLUMNS.length, 'Loading…'))

  let form = null
  newButton.addEventListener('click', () => {
    const open = createPanel.hidden
    createPanel.hidden = !open
    newButton.setAttribute('aria-expanded', String(open))
    if (open) {
      if (!form) {
        form = createForm(scope, (sbx) => {
          // Show it at once rather than on the next poll.
          lastList = [sbx, ...lastList.filter((s) => s.id !== sbx.id)]
          render()
          refresh()
        })
        createPanel.appendChild(form.el)
      }
      form.focus()
    }
  })
  showDestroyed.addEventListener('change', () => render())

  function makeRow(s) {
    const idCell = el('td', {}, sandboxLink(s.id))
    const badge = stateBadge(s.state)
    const cells = {
      state: el('td', { testid: 'sandbox-state' }, badge),
      template: el('td', { testid: 'sandbox-template' }),
      runtime: el('td', { testid: 'sandbox-runtime' }),
      age: el('td', { testid: 'sandbox-age' }),
      metadata: el('td', { testid: 'sandbox-metadata', class: 'meta' }),
    }
    const actions = lifecycleButtons(s, refresh, scope.signal)
    const tr = el(
      'tr',
      { testid: 'sandbox-row', 'data-sandbox-id': s.id },
      idCell,
      cells.state,
      cells.template,
      cells.runtime,
      cells.age,
      cells.metadata,
      el('td', {}, actions.el),
    )
    const row = {
      tr,
      update(next) {
        setBadge(badge, next.state)
        tr.setAttribute('data-state', str(next.state))
        setText(cells.template, str(next.template))
        setText(cells.runtime, str(next.runtime))
        setText(cells.age, age(next.created_at))
        const meta = metadataText(next.metadata)
        setText(cells.metadata, meta)
        actions.update(next)
      },
      dispose: () => actions.dispose(),
    }
    row.update(s)
    return row
  }

  function render() {
    const visible = lastList
      .filter((s) => showDestroyed.checked || s.state !== 'destroyed')
      .sort((a, b) => str(b.created_at).localeCompare(str(a.created_at)) || str(a.id).localeCompare(str(b.id)))
    const keep = new Set(visible.map((s) => s.id))
    for (const [id, row] of rows) {
      if (!keep.has(id)) {
        row.tr.remove()
        row.dispose()
        rows.delete(id)
      }
    }
    for (const child of [...tbody.children]) if (child.classList.contains('empty')) child.remove()
    // insertBefore only where the order differs: moving a row that holds focus would blur it.
    visible.forEach((s, i) => {
      let row = rows.get(s.id)
      if (!row) {
        row = makeRow(s)
        rows.set(s.id, row)
      } else row.update(s)
      if (tbody.children[i] !== row.tr) tbody.insertBefore(row.tr, tbody.children[i] || null)
    })
    if (visible.length === 0) {
      tbody.appendChild(
        messageRow(COLUMNS.length, loaded ? 'No sandboxes yet. Use “New sandbox” to create one.' : 'Loading…'),
      )
    }
  }

  let failing = false
  let seq = 0
  async function refresh() {
    // A poll and an action's refresh may overlap; only the newest answer is drawn.
    const mine = ++seq
    try {
      const list = await listAllSandboxes(scope.signal)
      if (mine !== seq) return
      lastList = list
      loaded = true
      if (failing) showError('')
      failing = false
      render()
    } catch (err) {
      if (scope.disposed) return
      failing = true
      showError('Could not list sandboxes', err)
    }
  }
  scope.poll(refresh, REFRESH_MS)
  scope.onDispose(() => {
    for (const row of rows.values()) row.dispose()
  })
  return h1
}
