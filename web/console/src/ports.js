// The Ports tab: preview URLs for ports inside the sandbox. A private port's token is shown
// once, right after it is opened (the API never returns it again).
import { button, el, field, isSafeUrl, messageRow, replaceChildren, table } from './dom.js'
import { request, enc, describeError } from './api.js'
import { showError, showStatus } from './notice.js'
import { str, timeCell } from './format.js'

const COLUMNS = ['Port', 'Access', 'URL', 'Opened', 'Connections', 'Requests', 'Actions']

// A link only for plain http(s) URLs; anything else stays visible text.
function urlNode(url, text = url) {
  const s = str(url)
  if (/^https?:\/\//i.test(s) && isSafeUrl(s)) {
    return el('a', { href: s, target: '_blank', rel: 'noopener noreferrer', class: 'mono', text })
  }
  return el('span', { class: 'mono', text: s })
}

export function mountPorts(panel, scope, ctx) {
  const id = ctx.id
  const number = el('input', { type: 'number', min: '1', max: '65535', required: true, testid: 'port-number', name: 'port', inputmode: 'numeric' })
  const isPublic = el('input', { type: 'checkbox', testid: 'port-public', name: 'public', id: 'port-public' })
  const openButton = el('button', { type: 'submit', class: 'primary', testid: 'port-open' }, 'Open port')
  const form = el(
    'form',
    { class: 'inline-form', testid: 'port-form', 'aria-label': 'Open a port' },
    field('Port', number).wrap,
    el('span', { class: 'check' }, isPublic, el('label', { for: 'port-public', text: 'Public (no token needed)' })),
    openButton,
  )
  const result = el('div', { class: 'result', role: 'status', 'aria-live': 'polite', testid: 'port-result' })
  const { table: listTable, tbody } = table('Open ports of ' + id, COLUMNS, { testid: 'ports-list', class: 'list' })
  tbody.appendChild(messageRow(COLUMNS.length, 'Loading…'))
  const refreshButton = button('Refresh', { testid: 'ports-refresh' })

  replaceChildren(
    panel,
    el('h2', { text: 'Ports' }),
    el('div', { class: 'toolbar wrap' }, form, refreshButton),
    result,
    el('div', { class: 'table-wrap' }, listTable),
  )

  function row(p) {
    const port = str(p.port)
    const close = button('Close', {
      class: 'small',
      testid: 'port-close',
      'aria-label': 'Close port ' + port,
      on: { click: () => closePort(port) },
    })
    return el(
      'tr',
      { testid: 'port-row', 'data-port': port },
      el('td', { class: 'num', text: port }),
      el('td', { text: p.public ? 'public' : 'private' }),
      el('td', {}, urlNode(p.url)),
      el('td', {}, timeCell(p.created_at)),
      el('td', { class: 'num', text: str(p.connections) }),
      el('td', { class: 'num', text: str(p.requests) }),
      el('td', {}, close),
    )
  }

  async function load() {
    try {
      const body = await request('/v1/sandboxes/' + enc(id) + '/ports', { signal: scope.signal })
      const ports = ((body && body.ports) || []).slice().sort((a, b) => Number(a.port) - Number(b.port))
      replaceChildren(tbody, ports.length ? ports.map(row) : messageRow(COLUMNS.length, 'No open ports.'))
    } catch (err) {
      if (scope.disposed) return
      replaceChildren(tbody, messageRow(COLUMNS.length, describeError('Could not list ports', err)))
      showError('Could not list the ports of ' + id, err)
    }
  }

  async function closePort(port) {
    try {
      await request('/v1/sandboxes/' + enc(id) + '/ports/' + enc(port), { method: 'DELETE', signal: scope.signal })
      showStatus('Closed port ' + port + '.')
      load()
    } catch (err) {
      if (!scope.disposed) showError('Could not close port ' + port, err)
    }
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault()
    const n = Number(number.value)
    if (!Number.isInteger(n) || n < 1 || n > 65535) {
      showError('A port is a whole number from 1 to 65535')
      number.focus()
      return
    }
    openButton.disabled = true
    try {
      const p = await request('/v1/sandboxes/' + enc(id) + '/ports', {
        method: 'POST',
        json: { port: n, public: isPublic.checked },
        signal: scope.signal,
      })
      const parts = [el('p', {}, 'Port ' + str(p.port) + ' is open at ', urlNode(p.url), '.')]
      if (p.token) {
        parts.push(
          el(
            'p',
            {},
            'Token (shown only now, copy it): ',
            el('code', { testid: 'port-token', class: 'token', text: str(p.token) }),
          ),
        )
        // The API's own way in for a browser: url?token= sets a cookie and drops the token
        // from the address bar (docs/ports.md).
        if (/^https?:\/\//i.test(str(p.url))) {
          try {
            const u = new URL(str(p.url))
            u.searchParams.set('token', str(p.token))
            parts.push(el('p', {}, urlNode(u.href, 'Open it in a new tab with the token')))
          } catch {
            // Not a URL after all; the plain text above is enough.
          }
        }
      }
      replaceChildren(result, parts)
      showStatus('Opened port ' + str(p.port) + '.')
      number.value = ''
      load()
    } catch (err) {
      if (scope.disposed) return
      replaceChildren(result, el('p', { text: describeError('Could not open port ' + n, err) }))
      showError('Could not open port ' + n, err)
    } finally {
      openButton.disabled = false
    }
  })

  refreshButton.addEventListener('click', () => load())
  return {
    show() {
      load()
    },
  }
}
