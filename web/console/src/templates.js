// #/templates: the templates this server has, and a build form (steps, or a Dockerfile the
// server turns into the same recipe) whose output streams into a log (SSE read through fetch,
// see sse.js) until the build's operation finishes.
import { button, el, field, messageRow, replaceChildren, setText, table } from './dom.js'
import { request, enc, describeError } from './api.js'
import { showError, showStatus } from './notice.js'
import { bytes, str, timeCell } from './format.js'
import { readSse } from './sse.js'

const COLUMNS = ['Name', 'Digest', 'Size', 'Created']
const LOG_CAP = 2 << 20 // characters kept in the on-page log; the oldest go first
const FINAL = new Set(['succeeded', 'failed'])

// One line per step change, as the server's plain-text rendering words it.
function stepLine(d) {
  let line = '--- step ' + str(d.step)
  if (d.of !== undefined) line += '/' + str(d.of)
  if (d.kind) line += ' ' + str(d.kind)
  line += ': ' + str(d.state)
  if (d.digest) line += ' ' + str(d.digest)
  if (d.exit_code !== undefined && d.exit_code !== null) line += ' (exit code ' + str(d.exit_code) + ')'
  return line + '\n'
}

function eventText(ev) {
  let d
  try {
    d = JSON.parse(ev.data)
  } catch {
    return ev.data + '\n'
  }
  if (!d || typeof d !== 'object') return str(d) + '\n'
  if (ev.event === 'log') return str(d.data)
  if (ev.event === 'step') return stepLine(d)
  if (ev.event === 'done') {
    return '--- done: ' + str(d.name) + ' ' + str(d.digest) + ' (' + str(d.steps_run) + ' steps ran, ' + str(d.steps_cached) + ' cached)\n'
  }
  if (ev.event === 'error') return '--- error: ' + str(d.message) + (d.code ? ' (' + str(d.code) + ')' : '') + '\n'
  return ''
}

function wide(node) {
  node.classList.add('wide')
  return node
}

export function mountTemplates(root, scope) {
  const h1 = el('h1', { tabindex: '-1', text: 'Templates' })
  const { table: listTable, tbody } = table('Templates on this server', COLUMNS, { testid: 'templates-list', class: 'list' })
  tbody.appendChild(messageRow(COLUMNS.length, 'Loading…'))
  const refreshButton = button('Refresh', { testid: 'templates-refresh' })

  const name = el('input', { type: 'text', testid: 'build-name', name: 'name', required: true, autocomplete: 'off', spellcheck: 'false' })
  const from = el('input', { type: 'text', testid: 'build-from', name: 'from', value: 'base', autocomplete: 'off', spellcheck: 'false' })
  const steps = el('textarea', { testid: 'build-steps', name: 'steps', rows: '6', spellcheck: 'false' })
  const dockerfile = el('textarea', { testid: 'build-dockerfile', name: 'dockerfile', rows: '6', spellcheck: 'false' })
  const submit = el('button', { type: 'submit', class: 'primary', testid: 'build-submit' }, 'Build template')
  const buildResult = el('p', { class: 'result', role: 'status', 'aria-live': 'polite', testid: 'build-result' })
  const log = el('pre', { class: 'build-log', role: 'log', tabindex: '0', 'aria-label': 'Build log', testid: 'build-log' })
  const form = el(
    'form',
    { class: 'build-form', testid: 'build-form', 'aria-label': 'Build a template' },
    el(
      'div',
      { class: 'fields' },
      field('Name', name, 'lowercase letters, digits, . _ -').wrap,
      field('From', from, 'a template name, or name@sha256:…').wrap,
      wide(field('Steps', steps, 'one shell command per line, each run as a step').wrap),
      wide(field('Dockerfile', dockerfile, 'instead of From and Steps: FROM, RUN, ENV, WORKDIR, USER, ARG, CMD (no COPY: there is no context here)').wrap),
    ),
    el('div', { class: 'form-actions' }, submit),
  )

  replaceChildren(
    root,
    h1,
    el('div', { class: 'toolbar' }, refreshButton),
    el('div', { class: 'table-wrap' }, listTable),
    el('section', { class: 'panel', 'aria-labelledby': 'build-heading' }, el('h2', { id: 'build-heading', text: 'Build a template' }), form, buildResult, log),
  )

  async function load() {
    try {
      const body = await request('/v1/templates', { signal: scope.signal })
      const list = ((body && body.templates) || []).slice().sort((a, b) => str(a.name).localeCompare(str(b.name)))
      replaceChildren(
        tbody,
        list.length
          ? list.map((t) =>
              el(
                'tr',
                { testid: 'template-row', 'data-template': str(t.name) },
                el('td', { class: 'mono', text: str(t.name) }),
                el('td', { class: 'mono digest', title: str(t.digest), text: str(t.digest) }),
                el('td', { class: 'num', text: bytes(t.size_bytes) }),
                el('td', {}, timeCell(t.created_at)),
              ),
            )
          : messageRow(COLUMNS.length, 'No templates yet.'),
      )
    } catch (err) {
      if (scope.disposed) return
      replaceChildren(tbody, messageRow(COLUMNS.length, describeError('Could not list templates', err)))
      showError('Could not list templates', err)
    }
  }

  let logChars = 0
  function append(text) {
    if (!text) return
    log.appendChild(document.createTextNode(text))
    logChars += text.length
    while (logChars > LOG_CAP && log.firstChild) {
      logChars -= log.firstChild.textContent.length
      log.removeChild(log.firstChild)
    }
    log.scrollTop = log.scrollHeight
  }

  async function waitOperation(opId) {
    for (let i = 0; i < 20; i++) {
      const op = await request('/v1/operations/' + enc(opId) + '?wait=true', { signal: scope.signal })
      if (op && FINAL.has(op.state)) return op
    }
    return request('/v1/operations/' + enc(opId), { signal: scope.signal })
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault()
    const tname = name.value.trim()
    const base = from.value.trim() || 'base'
    const recipe = dockerfile.value.trim()
      ? { name: tname, dockerfile: dockerfile.value }
      : {
          name: tname,
          from: base,
          steps: steps.value
            .split(/\r?\n/)
            .map((l) => l.trim())
            .filter(Boolean)
            .map((run) => ({ run })),
        }
    submit.disabled = true
    submit.setAttribute('aria-busy', 'true')
    replaceChildren(log)
    logChars = 0
    setText(buildResult, 'Starting the build of ' + tname + '…')
    let opId = ''
    try {
      const started = await request('/v1/templates', { method: 'POST', json: recipe, signal: scope.signal })
      opId = str(started && started.operation && started.operation.id)
      if (!opId) throw new Error('the server did not return an operation')
      setText(buildResult, 'Building ' + tname + ' (' + opId + ')…')
      try {
        const res = await request('/v1/templates/' + enc(tname) + '/builds/' + enc(opId) + '/logs', {
          raw: true,
          accept: 'text/event-stream',
          signal: scope.signal,
        })
        await readSse(res, (ev) => append(eventText(ev)))
      } catch (err) {
        // The log is a view of the build, not the build: say so and still wait for the result.
        if (scope.disposed) return
        append('--- the log stream stopped: ' + describeError('log', err) + '\n')
      }
      const op = await waitOperation(opId)
      if (op.state === 'succeeded') {
        setText(buildResult, 'Built template ' + tname + '.')
        showStatus('Built template ' + tname + '.')
      } else if (op.state === 'failed') {
        setText(buildResult, 'The build of ' + tname + ' failed: ' + str(op.error))
        showError('The build of ' + tname + ' failed: ' + str(op.error))
      } else {
        setText(buildResult, 'The build of ' + tname + ' is still ' + str(op.state) + ' (' + opId + ').')
      }
      load()
    } catch (err) {
      if (scope.disposed) return
      setText(buildResult, describeError('Could not build ' + tname, err))
      showError('Could not build ' + tname, err)
    } finally {
      submit.disabled = false
      submit.removeAttribute('aria-busy')
    }
  })

  refreshButton.addEventListener('click', () => load())
  load()
  return h1
}
