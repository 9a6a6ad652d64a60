// The "New sandbox" form: template, runtime, egress profiles and optional metadata, then
// POST /v1/sandboxes?wait=true. Egress goes in the X-Space-Egress-Profile header (the API's
// way to pick profiles); with none chosen the sandbox has no network egress at all.
import { el, field, replaceChildren } from './dom.js'
import { request, describeError } from './api.js'
import { showError, showStatus } from './notice.js'
import { sandboxLink } from './links.js'

function option(value, text = value, selected = false) {
  return el('option', { value, selected }, text)
}

// "k=v" per line (or comma separated) into the API's metadata map.
export function parseMetadata(text) {
  const out = {}
  for (const part of text.split(/[\n,]/)) {
    const item = part.trim()
    if (!item) continue
    const eq = item.indexOf('=')
    if (eq <= 0) throw new Error('metadata "' + item + '" is not of the form key=value')
    out[item.slice(0, eq).trim()] = item.slice(eq + 1).trim()
  }
  return out
}

export function createForm(scope, onCreated) {
  const template = el('select', { testid: 'create-template', name: 'template' }, option('base', 'base', true))
  const runtime = el(
    'select',
    { testid: 'create-runtime', name: 'runtime' },
    option('ns', 'ns (namespaces)', true),
    option('vm', 'vm (micro VM)'),
  )
  const egress = el('select', { testid: 'create-egress', name: 'egress', multiple: true, size: '4' })
  const metadata = el('textarea', { testid: 'create-metadata', name: 'metadata', rows: '2', spellcheck: 'false' })
  const submit = el('button', { type: 'submit', class: 'primary', testid: 'create-submit' }, 'Create sandbox')
  const result = el('p', { class: 'result', role: 'status', 'aria-live': 'polite', testid: 'create-result' })
  const egressField = field('Egress profiles', egress, 'None chosen: no network egress. Ctrl/Cmd-click picks several.')

  const form = el(
    'form',
    { class: 'create-form', testid: 'create-form', 'aria-label': 'Create a sandbox' },
    el('h2', { text: 'New sandbox' }),
    el(
      'div',
      { class: 'fields' },
      field('Template', template).wrap,
      field('Runtime', runtime).wrap,
      egressField.wrap,
      field('Metadata (optional)', metadata, 'key=value, one per line').wrap,
    ),
    el('div', { class: 'form-actions' }, submit),
    result,
  )

  // Fill the selects; a failure leaves "base" (always valid) and says why.
  ;(async () => {
    try {
      const body = await request('/v1/templates', { signal: scope.signal })
      const names = ((body && body.templates) || []).map((t) => String(t.name)).filter((n) => n && n !== 'base')
      for (const n of [...new Set(names)].sort()) template.appendChild(option(n))
    } catch (err) {
      if (!scope.disposed) showError('Could not list templates', err)
    }
    try {
      const body = await request('/v1/egress-profiles', { signal: scope.signal })
      const profiles = ((body && body.egress_profiles) || []).map((p) => String(p.name)).filter(Boolean)
      if (profiles.length === 0) egress.appendChild(el('option', { value: '', disabled: true }, 'no egress profiles defined'))
      for (const n of profiles.sort()) egress.appendChild(option(n))
    } catch (err) {
      if (!scope.disposed) showError('Could not list egress profiles', err)
    }
  })()

  form.addEventListener('submit', async (e) => {
    e.preventDefault()
    let meta
    try {
      meta = parseMetadata(metadata.value)
    } catch (err) {
      result.textContent = ''
      showError('Could not create the sandbox: ' + err.message)
      metadata.focus()
      return
    }
    const profiles = [...egress.selectedOptions].map((o) => o.value).filter(Boolean)
    const body = { template: template.value, runtime: runtime.value }
    if (Object.keys(meta).length) body.metadata = meta
    const headers = profiles.length ? { 'X-Space-Egress-Profile': profiles.join(',') } : {}
    submit.disabled = true
    submit.setAttribute('aria-busy', 'true')
    replaceChildren(result, 'Creating a ' + body.runtime + ' sandbox from ' + body.template + '… (the first one can take a minute)')
    try {
      const res = await request('/v1/sandboxes?wait=true', { method: 'POST', json: body, headers, signal: scope.signal })
      const sbx = res && res.sandbox
      if (!sbx || !sbx.id) throw new Error('the server did not return a sandbox')
      replaceChildren(result, 'Created ', sandboxLink(sbx.id), ' (' + String(sbx.state) + ').')
      showStatus('Created sandbox ' + sbx.id + '.')
      onCreated(sbx)
    } catch (err) {
      if (scope.disposed) return
      replaceChildren(result, describeError('Could not create the sandbox', err))
      showError('Could not create the sandbox', err)
    } finally {
      submit.disabled = false
      submit.removeAttribute('aria-busy')
    }
  })

  return { el: form, focus: () => template.focus() }
}
