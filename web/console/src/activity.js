// The Activity tab: every command run in the sandbox, and the egress and credential audit
// events (what the sandbox tried to reach, and whether the gateway let it). Refreshed every
// 3 s while the tab is shown; every cell is text, whatever the sandbox put in it.
import { button, el, messageRow, replaceChildren, table } from './dom.js'
import { request, enc } from './api.js'
import { showError } from './notice.js'
import { str, timeCell } from './format.js'

const REFRESH_MS = 3000
const CMD_COLUMNS = ['Started', 'Command', 'User', 'Directory', 'Finished', 'Exit', 'Process']
const EGRESS_COLUMNS = ['Time', 'Kind', 'Action', 'Host', 'Port', 'Protocol', 'Reason']

function exitText(c) {
  if (c.signal) return str(c.signal)
  if (c.exit_code !== null && c.exit_code !== undefined) return str(c.exit_code)
  return c.finished_at ? '' : 'running'
}

function reasonText(d) {
  if (d.reason !== undefined && d.reason !== null) return str(d.reason)
  const parts = []
  if (d.credential) parts.push('credential ' + str(d.credential))
  if (d.method) parts.push(str(d.method))
  if (d.profile) parts.push('profile ' + str(d.profile))
  return parts.join(', ')
}

export function mountActivity(panel, scope, ctx) {
  const id = ctx.id
  const refreshButton = button('Refresh', { testid: 'activity-refresh' })
  const cmds = table('Commands run in ' + id + ', newest first', CMD_COLUMNS, { testid: 'activity-commands', class: 'list' })
  const egress = table('Egress and credential events of ' + id + ', newest first', EGRESS_COLUMNS, {
    testid: 'activity-egress',
    class: 'list',
  })
  cmds.tbody.appendChild(messageRow(CMD_COLUMNS.length, 'Loading…'))
  egress.tbody.appendChild(messageRow(EGRESS_COLUMNS.length, 'Loading…'))

  replaceChildren(
    panel,
    el('h2', { text: 'Activity' }),
    el('div', { class: 'toolbar' }, refreshButton, el('span', { class: 'hint', text: 'Refreshed every 3 seconds.' })),
    el('h3', { text: 'Commands' }),
    el('div', { class: 'table-wrap' }, cmds.table),
    el('h3', { text: 'Network egress' }),
    el('div', { class: 'table-wrap' }, egress.table),
  )

  function commandRow(c) {
    const cmd = Array.isArray(c.cmd) ? c.cmd.map(str).join(' ') : str(c.cmd)
    return el(
      'tr',
      { testid: 'command-row', 'data-pid': str(c.pid) },
      el('td', {}, timeCell(c.started_at)),
      el('td', { class: 'mono cmd', text: cmd }),
      el('td', { text: str(c.user) }),
      el('td', { class: 'mono', text: str(c.cwd) }),
      el('td', {}, timeCell(c.finished_at)),
      el('td', { class: 'num', text: exitText(c) }),
      el('td', { class: 'mono', text: str(c.pid) }),
    )
  }

  function eventRow(e) {
    const d = e.detail && typeof e.detail === 'object' ? e.detail : {}
    const action = str(e.action)
    const cls = action === 'deny' ? 'action deny' : action === 'allow' ? 'action allow' : 'action'
    return el(
      'tr',
      { testid: 'egress-row', 'data-action': action, 'data-kind': str(e.kind) },
      el('td', {}, timeCell(e.time)),
      el('td', { text: str(e.kind) }),
      el('td', {}, el('span', { class: cls, text: action })),
      el('td', { class: 'mono', text: str(d.host) }),
      el('td', { class: 'num', text: str(d.port) }),
      el('td', { text: str(d.proto) }),
      el('td', { text: reasonText(d) }),
    )
  }

  // Only repaint when something changed, so text selection and reading position survive.
  let lastCmds = ''
  let lastEvents = ''
  let failing = false
  async function load() {
    try {
      const base = '/v1/audit?sandbox=' + enc(id) + '&kind='
      // Two calls: the audit list is capped, and exec events must not crowd out egress ones.
      const [c, eg, cr] = await Promise.all([
        request('/v1/sandboxes/' + enc(id) + '/commands', { signal: scope.signal }),
        request(base + 'egress', { signal: scope.signal }),
        request(base + 'credential', { signal: scope.signal }),
      ])
      if (failing) showError('')
      failing = false
      const commands = ((c && c.commands) || []).slice().sort((a, b) => str(b.started_at).localeCompare(str(a.started_at)))
      const events = [...((eg && eg.events) || []), ...((cr && cr.events) || [])]
        .filter((e) => e && (e.kind === 'egress' || e.kind === 'credential'))
        .sort((a, b) => Number(b.seq) - Number(a.seq))
      const cj = JSON.stringify(commands)
      if (cj !== lastCmds) {
        lastCmds = cj
        replaceChildren(
          cmds.tbody,
          commands.length ? commands.map(commandRow) : messageRow(CMD_COLUMNS.length, 'No commands have run yet.'),
        )
      }
      const ej = JSON.stringify(events)
      if (ej !== lastEvents) {
        lastEvents = ej
        replaceChildren(
          egress.tbody,
          events.length ? events.map(eventRow) : messageRow(EGRESS_COLUMNS.length, 'No egress or credential events yet.'),
        )
      }
    } catch (err) {
      if (scope.disposed) return
      failing = true
      showError('Could not load the activity of ' + id, err)
    }
  }

  refreshButton.addEventListener('click', () => load())
  let stop = null
  return {
    show() {
      if (!stop) stop = scope.poll(load, REFRESH_MS)
    },
    hide() {
      if (stop) stop()
      stop = null
    },
  }
}
