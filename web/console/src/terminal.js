// The Terminal tab: xterm.js on a WebSocket to /v1/sandboxes/<id>/terminal.
//
// The browser's WebSocket cannot send an Authorization header, so the key rides in the
// subprotocol list as "space.bearer.<base64url(key)>" (never in the URL, where it would land
// in logs and history). Output arrives as binary frames; control messages are JSON text.
// The shell's pid is kept per sandbox in sessionStorage, so a dropped connection (or a page
// reload) reattaches to the same shell instead of starting a new one.
import { Terminal } from '@xterm/xterm'
import { FitAddon } from '@xterm/addon-fit'
import { button, el, field, replaceChildren, setText } from './dom.js'
import { getKey, enc, request, ApiError } from './api.js'
import { showError, showStatus } from './notice.js'

const PROTOCOL = 'space.terminal.v1'
const BACKOFF_S = [1, 2, 4, 8, 16]
const END_GRACE_MS = 5000
const PID = /^proc_[A-Za-z0-9_-]{1,80}$/

export function base64url(text) {
  const bytes = new TextEncoder().encode(text)
  let bin = ''
  for (const b of bytes) bin += String.fromCharCode(b)
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

function pidKey(id) {
  return 'space.terminal.' + id
}

function loadSession(id) {
  try {
    const s = JSON.parse(sessionStorage.getItem(pidKey(id)) || 'null')
    return s && typeof s.pid === 'string' && PID.test(s.pid) ? s : null
  } catch {
    return null
  }
}

function saveSession(id, pid, user) {
  try {
    sessionStorage.setItem(pidKey(id), JSON.stringify({ pid, user }))
  } catch {
    // Without storage a reconnect starts a new shell; nothing else breaks.
  }
}

function forgetSession(id) {
  try {
    sessionStorage.removeItem(pidKey(id))
  } catch {
    // As above.
  }
}

export function terminalUrl(id, user, cols, rows, pid) {
  const scheme = location.protocol === 'https:' ? 'wss://' : 'ws://'
  return (
    scheme + location.host + '/v1/sandboxes/' + enc(id) + '/terminal?user=' + enc(user) +
    '&cols=' + cols + '&rows=' + rows + (pid ? '&pid=' + enc(pid) : '')
  )
}

export function mountTerminal(panel, scope, ctx) {
  const id = ctx.id
  const user = el(
    'select',
    { testid: 'terminal-user', name: 'user' },
    el('option', { value: 'root', selected: true }, 'root'),
    el('option', { value: 'user' }, 'user (uid 1000)'),
  )
  const openButton = button('Open terminal', { class: 'primary', testid: 'open-terminal' })
  const endButton = button('End session', { testid: 'terminal-end', disabled: true })
  const reconnectButton = button('Reconnect', { testid: 'terminal-reconnect', hidden: true })
  const status = el('p', { class: 'term-status', role: 'status', 'aria-live': 'polite', testid: 'terminal-status' })
  const screen = el('div', { class: 'terminal-screen', testid: 'terminal' })

  const saved = loadSession(id)
  if (saved && (saved.user === 'root' || saved.user === 'user')) user.value = saved.user

  replaceChildren(
    panel,
    el('h2', { class: 'visually-hidden', text: 'Terminal' }),
    el(
      'div',
      { class: 'toolbar' },
      field('User', user).wrap,
      openButton,
      endButton,
      reconnectButton,
    ),
    status,
    screen,
  )
  setText(
    status,
    saved ? 'A shell (' + saved.pid + ') may still be running: Open terminal reattaches to it.' : 'Not connected.',
  )

  let term = null
  let fit = null
  let ws = null
  let retries = 0
  let retryTimer = null
  let endTimer = null
  let current = null // what the live socket has seen (see connect)
  const encoder = new TextEncoder()

  function send(data) {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(data)
  }

  function ensureTerm() {
    if (term) return
    term = new Terminal({
      cursorBlink: true,
      fontFamily: 'ui-monospace, "SF Mono", Menlo, Consolas, "DejaVu Sans Mono", "Liberation Mono", monospace',
      fontSize: 14,
      // At 1.0 some monospace fonts lose the bottom of "_" in the DOM renderer.
      lineHeight: 1.2,
      scrollback: 5000,
    })
    fit = new FitAddon()
    term.loadAddon(fit)
    term.open(screen)
    term.onData((d) => send(encoder.encode(d)))
    // onBinary strings carry one byte per char (mouse reports in X10 mode): not UTF-8 text.
    term.onBinary((d) => send(Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff)))
    term.onResize(({ cols, rows }) => send(JSON.stringify({ type: 'resize', cols, rows })))
    scope.onDispose(() => term.dispose())
    doFit()
  }

  let fitQueued = false
  function doFit() {
    if (!fit || panel.hidden) return
    try {
      fit.fit()
    } catch {
      // Not laid out yet (hidden); the next resize or show() fits.
    }
  }
  function queueFit() {
    if (fitQueued) return
    fitQueued = true
    requestAnimationFrame(() => {
      fitQueued = false
      doFit()
    })
  }
  scope.listen(window, 'resize', queueFit)
  if (typeof ResizeObserver === 'function') {
    const ro = new ResizeObserver(queueFit)
    ro.observe(screen)
    scope.onDispose(() => ro.disconnect())
  }

  function setConnected(connected) {
    openButton.disabled = connected
    user.disabled = connected
    endButton.disabled = !connected
  }

  function clearTimers() {
    if (retryTimer) clearTimeout(retryTimer)
    retryTimer = null
    if (endTimer) clearTimeout(endTimer)
    endTimer = null
  }

  // A stored pid may name a shell that has since ended (or a sandbox that restarted); the
  // server refuses such a reattach before the WebSocket opens, which the browser cannot tell
  // from a network failure. So ask first, and start a new shell when the old one is gone.
  async function shellAlive(pid) {
    try {
      const p = await request('/v1/sandboxes/' + enc(id) + '/processes/' + enc(pid), { signal: scope.signal })
      return !!p && p.state !== 'exited'
    } catch (err) {
      return !(err instanceof ApiError && (err.status === 404 || err.status === 400))
    }
  }

  let attempt = 0
  async function connect() {
    clearTimers()
    reconnectButton.hidden = true
    ensureTerm()
    doFit()
    const mine = ++attempt
    const who = user.value === 'user' ? 'user' : 'root'
    const prior = loadSession(id)
    let pid = prior && prior.user === who ? prior.pid : ''
    setConnected(true)
    if (pid) {
      setText(status, 'Looking for shell ' + pid + '…')
      const alive = await shellAlive(pid)
      if (mine !== attempt || scope.disposed) return
      if (!alive) {
        forgetSession(id)
        term.write('\r\n[the earlier shell has ended; starting a new one]\r\n')
        pid = ''
      }
    }
    const cols = term.cols || 80
    const rows = term.rows || 24
    let socket
    try {
      socket = new WebSocket(terminalUrl(id, who, cols, rows, pid), [PROTOCOL, 'space.bearer.' + base64url(getKey())])
    } catch (err) {
      setConnected(false)
      setText(status, 'Could not open the terminal: ' + err.message)
      showError('Could not open the terminal: ' + err.message)
      reconnectButton.hidden = false
      return
    }
    socket.binaryType = 'arraybuffer'
    ws = socket
    setConnected(true)
    setText(status, pid ? 'Reattaching to ' + pid + '…' : 'Connecting…')
    // What this socket learnt before it closed decides whether to reconnect.
    const seen = { exit: false, error: null, ending: false }
    current = seen

    socket.addEventListener('open', () => {
      if (ws !== socket) return
      setText(status, 'Connected as ' + who + '.')
      // The server learns the size from the URL; send it again in case fit ran meanwhile.
      send(JSON.stringify({ type: 'resize', cols: term.cols, rows: term.rows }))
      term.focus()
    })
    socket.addEventListener('message', (ev) => {
      if (ws !== socket) return
      if (typeof ev.data !== 'string') {
        term.write(new Uint8Array(ev.data))
        return
      }
      let msg
      try {
        msg = JSON.parse(ev.data)
      } catch {
        return // Not a control message we know; never execute or render it as markup.
      }
      if (!msg || typeof msg !== 'object') return
      if (msg.type === 'started') {
        retries = 0
        if (typeof msg.pid === 'string' && PID.test(msg.pid)) {
          saveSession(id, msg.pid, who)
          setText(status, 'Connected as ' + who + ' (' + msg.pid + ').')
        }
      } else if (msg.type === 'exit') {
        seen.exit = true
        forgetSession(id)
        const how = msg.signal ? 'signal ' + String(msg.signal) : 'exit code ' + String(msg.exit_code)
        term.write('\r\n[session ended]\r\n')
        setText(status, '[session ended] (' + how + ')')
        showStatus('Terminal session ended (' + how + ').')
      } else if (msg.type === 'error') {
        seen.error = msg
        const text = 'Terminal error (' + String(msg.code) + '): ' + String(msg.message)
        setText(status, text)
        showError(text)
      }
    })
    socket.addEventListener('close', () => {
      if (ws !== socket) return
      ws = null
      setConnected(false)
      if (endTimer) clearTimeout(endTimer)
      endTimer = null
      if (seen.exit || seen.ending) {
        if (!seen.exit) setText(status, 'Session closed.')
        return
      }
      reconnectButton.hidden = false
      const why = seen.error ? ' (' + String(seen.error.code) + ': ' + String(seen.error.message) + ')' : ''
      if (retries >= BACKOFF_S.length) {
        setText(status, 'Disconnected' + why + '. Gave up after ' + BACKOFF_S.length + ' attempts; use Reconnect to try again.')
        return
      }
      const wait = BACKOFF_S[retries]
      retries += 1
      setText(status, 'Disconnected' + why + '. Reconnecting in ' + wait + ' s (attempt ' + retries + ' of ' + BACKOFF_S.length + ')…')
      retryTimer = setTimeout(connect, wait * 1000)
    })
  }

  openButton.addEventListener('click', () => {
    retries = 0
    connect()
  })
  reconnectButton.addEventListener('click', () => {
    retries = 0
    connect()
  })
  endButton.addEventListener('click', () => {
    if (!ws || !current) return
    current.ending = true
    send(JSON.stringify({ type: 'end' }))
    setText(status, 'Ending the session…')
    const socket = ws
    // The server answers with an exit message and closes; if it does not, we close.
    endTimer = setTimeout(() => socket.close(1000, 'ended'), END_GRACE_MS)
  })

  scope.onDispose(() => {
    attempt += 1 // a connect waiting on its pid check must not open a socket now
    clearTimers()
    if (ws) {
      const socket = ws
      ws = null
      // Leaving the view detaches; the shell keeps running and its pid stays for a reattach.
      socket.close(1000, 'detached')
    }
  })

  return {
    show() {
      queueFit()
      if (term) term.focus()
    },
  }
}
