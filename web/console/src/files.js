// The Files tab: browse, view, download and upload files inside the sandbox. Names and
// contents are the sandbox's (hostile) data: they are only ever text, and downloads go
// through an object URL of bytes we fetched, never a link the sandbox chose.
import { button, el, field, messageRow, replaceChildren, setText, table } from './dom.js'
import { request, enc, describeError, ApiError } from './api.js'
import { showError, showStatus } from './notice.js'
import { bytes, octalMode, str, timeCell } from './format.js'

const VIEW_CAP = 1 << 20 // the viewer shows at most 1 MiB
const COLUMNS = ['Name', 'Type', 'Size', 'Mode', 'Modified', 'Actions']
const REVOKE_MS = 60000

export function joinPath(dir, name) {
  return (dir === '/' ? '' : dir.replace(/\/+$/, '')) + '/' + name
}

function parentOf(path) {
  const i = path.replace(/\/+$/, '').lastIndexOf('/')
  return i <= 0 ? '/' : path.slice(0, i)
}

function filesUrl(id, sub, path) {
  return '/v1/sandboxes/' + enc(id) + '/files' + sub + '?path=' + enc(path)
}

// Reads at most `cap` bytes of a response body, then stops the download.
async function readCapped(res, cap) {
  if (!res.body || !res.body.getReader) {
    const all = new Uint8Array(await res.arrayBuffer())
    return { data: all.subarray(0, cap), more: all.length > cap }
  }
  const reader = res.body.getReader()
  const chunks = []
  let n = 0
  let more = false
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    if (n + value.length > cap) {
      chunks.push(value.subarray(0, cap - n))
      n = cap
      more = true
      await reader.cancel()
      break
    }
    chunks.push(value)
    n += value.length
  }
  const data = new Uint8Array(n)
  let at = 0
  for (const c of chunks) {
    data.set(c, at)
    at += c.length
  }
  return { data, more }
}

export function mountFiles(panel, scope, ctx) {
  const id = ctx.id
  let dir = '/root'

  const crumbs = el('ol', { class: 'breadcrumb' })
  const pathInput = el('input', { type: 'text', testid: 'file-path', name: 'path', spellcheck: 'false', autocomplete: 'off' })
  const goForm = el(
    'form',
    { class: 'inline-form', 'aria-label': 'Go to a folder' },
    field('Folder', pathInput).wrap,
    el('button', { type: 'submit', testid: 'file-go' }, 'Go'),
  )
  const upload = el('input', { type: 'file', multiple: true, testid: 'file-upload', name: 'upload' })
  const mkdirName = el('input', { type: 'text', testid: 'file-mkdir-name', name: 'folder', autocomplete: 'off' })
  const mkdirForm = el(
    'form',
    { class: 'inline-form', 'aria-label': 'New folder' },
    field('New folder name', mkdirName).wrap,
    el('button', { type: 'submit', testid: 'file-mkdir' }, 'Create folder'),
  )
  const refreshButton = button('Refresh', { testid: 'file-refresh' })
  const upButton = button('Up one folder', { testid: 'file-up' })
  const { table: listTable, tbody } = table('Entries of the current folder', COLUMNS, { testid: 'file-list', class: 'list' })
  const caption = listTable.querySelector('caption')
  const viewTitle = el('h3', { testid: 'file-view-title', text: 'No file open' })
  const viewNote = el('p', { class: 'hint', testid: 'file-view-note' })
  const view = el('pre', { class: 'file-view', testid: 'file-view', tabindex: '0', 'aria-label': 'File contents' })

  replaceChildren(
    panel,
    el(
      'div',
      { testid: 'file-browser', class: 'file-browser' },
      el('h2', { text: 'Files' }),
      el('nav', { 'aria-label': 'Folder path', class: 'crumbs-nav' }, crumbs),
      el(
        'div',
        { class: 'toolbar wrap' },
        goForm,
        field('Upload files here', upload).wrap,
        mkdirForm,
        upButton,
        refreshButton,
      ),
      el('div', { class: 'table-wrap' }, listTable),
      el('section', { class: 'viewer', 'aria-label': 'File viewer' }, viewTitle, viewNote, view),
    ),
  )

  function drawCrumbs() {
    const parts = dir.split('/').filter(Boolean)
    const items = [{ label: '/', path: '/' }]
    parts.forEach((p, i) => items.push({ label: p, path: '/' + parts.slice(0, i + 1).join('/') }))
    replaceChildren(
      crumbs,
      items.map((it, i) =>
        el(
          'li',
          {},
          i === items.length - 1
            ? el('span', { 'aria-current': 'location', class: 'mono', text: it.label })
            : button(it.label, { class: 'link mono', testid: 'file-crumb', on: { click: () => navigate(it.path) } }),
        ),
      ),
    )
    pathInput.value = dir
    upButton.disabled = dir === '/'
    setText(caption, 'Entries of ' + dir)
  }

  function entryRow(e) {
    const path = str(e.path) || joinPath(dir, str(e.name))
    const name = str(e.name) || path
    const type = str(e.type)
    const isDir = type === 'dir'
    const nameButton = button(isDir ? name + '/' : name, {
      class: 'link mono',
      testid: isDir ? 'file-open-dir' : 'file-open',
      on: { click: () => (isDir ? navigate(path) : type === 'symlink' ? openLink(path, name) : viewFile(path, e.size)) },
    })
    const actions = el('div', { class: 'actions' })
    if (!isDir) {
      actions.appendChild(
        button('View', { class: 'small', testid: 'file-view-button', 'aria-label': 'View ' + name, on: { click: () => viewFile(path, e.size) } }),
      )
      actions.appendChild(
        button('Download', {
          class: 'small',
          testid: 'file-download',
          'aria-label': 'Download ' + name,
          on: { click: () => download(path, name) },
        }),
      )
    }
    return el(
      'tr',
      { testid: 'file-entry', 'data-path': path, 'data-type': type },
      el('td', {}, nameButton),
      el('td', { text: type }),
      el('td', { class: 'num', text: isDir ? '' : bytes(e.size) }),
      el('td', { class: 'mono', text: octalMode(e.mode) }),
      el('td', {}, timeCell(e.mtime)),
      el('td', {}, actions),
    )
  }

  let seq = 0
  async function load() {
    const mine = ++seq
    drawCrumbs()
    replaceChildren(tbody, messageRow(COLUMNS.length, 'Loading…'))
    try {
      const body = await request(filesUrl(id, '/list', dir), { signal: scope.signal })
      if (mine !== seq) return
      const entries = ((body && body.entries) || []).filter((e) => e && e.path !== dir)
      entries.sort((a, b) => (a.type === 'dir' ? 0 : 1) - (b.type === 'dir' ? 0 : 1) || str(a.name).localeCompare(str(b.name)))
      replaceChildren(tbody, entries.length ? entries.map(entryRow) : messageRow(COLUMNS.length, 'This folder is empty.'))
    } catch (err) {
      if (scope.disposed || mine !== seq) return
      replaceChildren(tbody, messageRow(COLUMNS.length, describeError('Could not list ' + dir, err)))
      showError('Could not list ' + dir, err)
    }
  }

  function navigate(path) {
    dir = path || '/'
    load()
  }

  // A symlink may lead to a folder or a file; the guest resolves it inside the sandbox.
  async function openLink(path, name) {
    try {
      await request(filesUrl(id, '/list', path), { signal: scope.signal })
      navigate(path)
    } catch (err) {
      if (err instanceof ApiError && err.code !== 'invalid_argument') return showError('Could not open ' + name, err)
      viewFile(path)
    }
  }

  async function viewFile(path, size) {
    setText(viewTitle, 'Contents of ' + path)
    setText(viewNote, 'Loading…')
    setText(view, '')
    try {
      const res = await request(filesUrl(id, '', path), { raw: true, signal: scope.signal })
      const { data, more } = await readCapped(res, VIEW_CAP)
      setText(view, new TextDecoder('utf-8', { fatal: false }).decode(data))
      const total = Number.isFinite(Number(size)) ? ' of ' + bytes(size) : ''
      setText(viewNote, more ? 'Showing the first 1 MiB' + total + '. Download the file for all of it.' : bytes(data.length))
    } catch (err) {
      if (scope.disposed) return
      setText(viewNote, describeError('Could not read ' + path, err))
      showError('Could not read ' + path, err)
    }
  }

  async function download(path, name) {
    try {
      showStatus('Downloading ' + path + '…')
      const res = await request(filesUrl(id, '', path), { raw: true, signal: scope.signal })
      const blob = await res.blob()
      const url = URL.createObjectURL(blob)
      const a = el('a', { href: url, download: name, class: 'visually-hidden' }, 'download')
      document.body.appendChild(a)
      a.click()
      a.remove()
      // Revoking at once can cancel the save in some browsers; the bytes are ours either way.
      setTimeout(() => URL.revokeObjectURL(url), REVOKE_MS)
      showStatus('Downloaded ' + path + ' (' + bytes(blob.size) + ').')
    } catch (err) {
      if (!scope.disposed) showError('Could not download ' + path, err)
    }
  }

  upload.addEventListener('change', async () => {
    const files = [...(upload.files || [])]
    const target = dir
    let done = 0
    for (const f of files) {
      // Browsers give bare names; refuse anything that could climb out of the folder.
      if (!f.name || f.name === '.' || f.name === '..' || f.name.includes('/')) {
        showError('Could not upload "' + f.name + '": not a plain file name')
        continue
      }
      const path = joinPath(target, f.name)
      showStatus('Uploading ' + path + '…')
      try {
        await request(filesUrl(id, '', path), {
          method: 'PUT',
          body: f,
          headers: { 'Content-Type': 'application/octet-stream' },
          signal: scope.signal,
        })
        done += 1
      } catch (err) {
        if (scope.disposed) return
        showError('Could not upload ' + path, err)
      }
    }
    upload.value = ''
    if (done) showStatus('Uploaded ' + done + (done === 1 ? ' file' : ' files') + ' to ' + target + '.')
    if (dir === target) load()
  })

  goForm.addEventListener('submit', (e) => {
    e.preventDefault()
    const p = pathInput.value.trim()
    if (!p.startsWith('/')) return showError('A folder path starts with /')
    navigate(p.length > 1 ? p.replace(/\/+$/, '') : '/')
  })

  mkdirForm.addEventListener('submit', async (e) => {
    e.preventDefault()
    const name = mkdirName.value.trim()
    if (!name || name === '.' || name === '..' || name.includes('/')) return showError('A folder name cannot be empty or contain /')
    const path = joinPath(dir, name)
    try {
      await request('/v1/sandboxes/' + enc(id) + '/files/mkdir', { method: 'POST', json: { path }, signal: scope.signal })
      mkdirName.value = ''
      showStatus('Created folder ' + path + '.')
      load()
    } catch (err) {
      if (!scope.disposed) showError('Could not create folder ' + path, err)
    }
  })

  refreshButton.addEventListener('click', () => load())
  upButton.addEventListener('click', () => navigate(parentOf(dir)))

  let loaded = false
  return {
    show() {
      if (!loaded) {
        loaded = true
        load()
      }
    },
  }
}
