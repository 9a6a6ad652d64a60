// #/login: the API key, checked against the server before it is kept. The key is kept only
// in sessionStorage (api.js) and the input is cleared once it has been accepted.
import { el, field, replaceChildren, setText } from './dom.js'
import { request, setKey, describeError, ApiError } from './api.js'

export function mountLogin(root, scope, { message, onLogin }) {
  const h1 = el('h1', { tabindex: '-1', text: 'Sign in to SPACE' })
  const key = el('input', {
    type: 'password',
    id: 'login-key',
    name: 'key',
    testid: 'login-key',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
  })
  const submit = el('button', { type: 'submit', class: 'primary', testid: 'login-submit' }, 'Sign in')
  const error = el('p', { class: 'alert', role: 'alert', 'aria-live': 'assertive', testid: 'login-error' })
  const form = el(
    'form',
    { class: 'login-form', testid: 'login-form', 'aria-labelledby': 'login-heading' },
    field('API key', key, 'Kept in this browser tab only, until you log out or close the tab.').wrap,
    el('div', { class: 'form-actions' }, submit),
    error,
  )
  h1.id = 'login-heading'
  replaceChildren(root, el('section', { class: 'login' }, h1, el('p', { text: 'Enter an API key of this SPACE server.' }), form))
  if (message) setText(error, message)

  form.addEventListener('submit', async (e) => {
    e.preventDefault()
    const candidate = key.value.trim()
    if (!candidate) {
      setText(error, 'Enter an API key.')
      key.focus()
      return
    }
    setText(error, '')
    submit.disabled = true
    submit.setAttribute('aria-busy', 'true')
    try {
      await request('/v1/sandboxes?limit=1', { key: candidate, signal: scope.signal })
      setKey(candidate)
      key.value = ''
      onLogin()
    } catch (err) {
      if (scope.disposed) return
      if (err instanceof ApiError && err.status === 401) {
        setText(error, describeError('The server refused this key', err))
      } else {
        setText(error, describeError('Could not check the key', err))
      }
      key.focus()
      key.select()
    } finally {
      submit.disabled = false
      submit.removeAttribute('aria-busy')
    }
  })
  return h1
}
