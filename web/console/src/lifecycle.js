// Pause / resume / suspend / destroy buttons for one sandbox, used in the list rows and in the
// detail header. Buttons are enabled only in states where the API accepts the call, so a
// click never races a transition we already know about; the server's 409 still shows if it
// happens anyway.
import { button, el } from './dom.js'
import { request, enc } from './api.js'
import { showError, showStatus } from './notice.js'

const ACTIONS = [
  { name: 'pause', label: 'Pause', busy: 'Pausing…', done: 'paused', allowed: ['running'] },
  { name: 'resume', label: 'Resume', busy: 'Resuming…', done: 'resumed', allowed: ['paused', 'suspended'] },
  { name: 'suspend', label: 'Suspend', busy: 'Suspending…', done: 'suspended', allowed: ['running', 'paused'] },
]
const NOT_DESTROYABLE = new Set(['destroyed', 'destroying'])
const CONFIRM_MS = 8000

// onChange() is called after an action finished (or failed), so the owner refreshes at once
// instead of waiting for its next poll.
export function lifecycleButtons(sandbox, onChange, signal) {
  const id = sandbox.id
  let state = sandbox.state
  let busy = null
  const buttons = {}
  const wrap = el('div', { class: 'actions', role: 'group', 'aria-label': 'Actions for ' + id })

  const run = async (name, busyText, doneText, call) => {
    busy = name
    buttons[name].textContent = busyText
    buttons[name].setAttribute('aria-busy', 'true')
    refresh()
    try {
      await call()
      showStatus('Sandbox ' + id + ' ' + doneText + '.')
    } catch (err) {
      if (!signal || !signal.aborted) showError('Could not ' + name + ' sandbox ' + id, err)
    } finally {
      busy = null
      buttons[name].removeAttribute('aria-busy')
      resetLabels()
      refresh()
      if (onChange) onChange()
    }
  }

  for (const a of ACTIONS) {
    buttons[a.name] = button(a.label, {
      class: 'small',
      testid: 'action-' + a.name,
      on: {
        click: () =>
          run(a.name, a.busy, a.done, () =>
            request('/v1/sandboxes/' + enc(id) + '/' + a.name + '?wait=true', { method: 'POST', json: {}, signal }),
          ),
      },
    })
    wrap.appendChild(buttons[a.name])
  }

  // Two steps in the page rather than window.confirm: the second click on the same button
  // (within a few seconds) destroys, Escape or the timeout disarms it.
  let armed = false
  let disarmTimer = null
  const disarm = () => {
    armed = false
    if (disarmTimer) clearTimeout(disarmTimer)
    disarmTimer = null
    const b = buttons.destroy
    b.textContent = 'Destroy'
    b.classList.remove('confirm')
    b.removeAttribute('data-confirm')
  }
  buttons.destroy = button('Destroy', {
    class: 'small danger',
    testid: 'action-destroy',
    on: {
      click: () => {
        if (!armed) {
          armed = true
          const b = buttons.destroy
          b.textContent = 'Really destroy?'
          b.classList.add('confirm')
          b.setAttribute('data-confirm', 'true')
          disarmTimer = setTimeout(disarm, CONFIRM_MS)
          return
        }
        disarm()
        run('destroy', 'Destroying…', 'destroyed', () =>
          request('/v1/sandboxes/' + enc(id) + '?wait=true', { method: 'DELETE', signal }),
        )
      },
      keydown: (e) => {
        if (e.key === 'Escape' && armed) disarm()
      },
    },
  })
  wrap.appendChild(buttons.destroy)

  function resetLabels() {
    for (const a of ACTIONS) buttons[a.name].textContent = a.label
    if (!armed) buttons.destroy.textContent = 'Destroy'
  }

  function refresh() {
    for (const a of ACTIONS) buttons[a.name].disabled = busy !== null || !a.allowed.includes(state)
    buttons.destroy.disabled = busy !== null || NOT_DESTROYABLE.has(state)
    if (buttons.destroy.disabled && armed) disarm()
  }
  refresh()

  return {
    el: wrap,
    update(next) {
      state = next.state
      refresh()
    },
    dispose() {
      if (disarmTimer) clearTimeout(disarmTimer)
    },
  }
}
