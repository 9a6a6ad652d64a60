// The web console in a real browser (docs/console.md): Debian's chromium, headless, against a
// running SPACE. Logs in (a wrong key first, then the right one by keyboard alone), creates a
// sandbox with an egress profile, opens its terminal and types `echo $((6*7))` until 42 shows,
// makes a refused DNS lookup there, uploads, views and downloads a file, takes a snapshot,
// forks it from the tree and finds the fork in the list, finds the refused lookup in the
// activity view, builds a template from a Dockerfile with its log streaming, and runs
// axe-core's WCAG 2 A/AA rules on every view. Along the way: no
// request leaves the console's origin and the page raises no CSP violation.
// Needs CONSOLE_URL (http://host:port), SPACE_API_KEY, SHOT_DIR; TEMPLATE, PROFILE optional.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { chromium } from 'playwright-core'

const base = process.env.CONSOLE_URL
const key = process.env.SPACE_API_KEY
const shots = process.env.SHOT_DIR
const template = process.env.TEMPLATE || 'base'
const profile = process.env.PROFILE || ''
assert.ok(base && key && shots, 'CONSOLE_URL, SPACE_API_KEY and SHOT_DIR are required')
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

const steps = []
function step(name) {
  steps.push({ step: name, at_ms: Date.now() - t0 })
  console.error(`[console.mjs] ${name}`)
}
const t0 = Date.now()

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  // Root in CI: chromium's own sandbox needs an unprivileged user. The pages are the test's.
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
})
const a11y = []
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, acceptDownloads: true })
  const page = await context.newPage()
  const foreign = []
  page.on('request', (r) => {
    const u = r.url()
    if (!u.startsWith(base) && !u.startsWith('blob:') && !u.startsWith('data:')) foreign.push(u)
  })
  const pageErrors = []
  page.on('pageerror', (e) => pageErrors.push(String(e)))
  await page.addInitScript(() => {
    window.__cspViolations = []
    document.addEventListener('securitypolicyviolation', (e) =>
      window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`))
  })
  const tid = (id) => page.locator(`[data-testid="${id}"]`)
  const shot = async (name) => page.screenshot({ path: `${shots}/${name}.png` })
  // axe-core is evaluated through the DevTools protocol, which the page's CSP does not govern.
  const checkA11y = async (view) => {
    await page.evaluate(axeSource)
    const r = await page.evaluate(async () => {
      const res = await window.axe.run(document, { runOnly: ['wcag2a', 'wcag2aa'] })
      return res.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }))
    })
    a11y.push({ view, violations: r })
  }

  // A wrong key: a clear message, still on the login view.
  const resp = await page.goto(`${base}/console`, { waitUntil: 'load' })
  assert.equal(resp.status(), 200)
  const csp = resp.headers()['content-security-policy'] || ''
  assert.match(csp, /script-src 'self'/)
  assert.ok(!/unsafe-eval/.test(csp) && !/script-src[^;]*unsafe-inline/.test(csp), csp)
  await tid('login-key').fill('space_not-the-key')
  await tid('login-submit').click()
  await tid('login-error').waitFor({ timeout: 15000 })
  assert.match(await tid('login-error').textContent(), /refused|invalid/i)
  await checkA11y('login')
  await shot('login-wrong-key')
  step('wrong key refused')

  // The right key, by keyboard alone: Tab to the field, type, Enter.
  await page.goto(`${base}/console`, { waitUntil: 'load' })
  let focused = ''
  for (let i = 0; i < 8 && focused !== 'login-key'; i++) {
    await page.keyboard.press('Tab')
    focused = await page.evaluate(() => document.activeElement?.getAttribute('data-testid') || '')
  }
  assert.equal(focused, 'login-key', 'Tab never reached the key field')
  await page.keyboard.type(key)
  await page.keyboard.press('Enter')
  await tid('new-sandbox').waitFor({ timeout: 15000 })
  assert.ok(!page.url().includes(key), 'the key is in the address')
  assert.equal(await page.evaluate(() => localStorage.length), 0)
  assert.equal(await page.evaluate(() => document.cookie), '')
  step('logged in by keyboard')

  // Create a sandbox from the form.
  const before = new Set(await tid('sandbox-row').evaluateAll((rows) => rows.map((r) => r.dataset.sandboxId)))
  await tid('new-sandbox').click()
  await tid('create-template').selectOption(template)
  if (profile) {
    const egress = tid('create-egress')
    if ((await egress.evaluate((e) => e.tagName)) === 'SELECT') {
      await egress.selectOption(profile)
    } else {
      await egress.locator(`input[value="${profile}"]`).check()
    }
  }
  await checkA11y('create form')
  await tid('create-submit').click()
  let sid = ''
  await page.waitForFunction((known) => [...document.querySelectorAll('[data-testid="sandbox-row"]')]
    .some((r) => !known.includes(r.dataset.sandboxId)), [...before], { timeout: 120000 })
  await page.goto(`${base}/console#/sandboxes`)
  await page.waitForFunction((known) => [...document.querySelectorAll('[data-testid="sandbox-row"]')]
    .some((r) => !known.includes(r.dataset.sandboxId) && /running/.test(r.textContent)), [...before], { timeout: 120000 })
  sid = (await tid('sandbox-row').evaluateAll((rows, known) =>
    rows.map((r) => r.dataset.sandboxId).filter((id) => !known.includes(id)), [...before]))[0]
  assert.ok(sid && sid.startsWith('sbx_'), sid)
  await checkA11y('sandboxes')
  await shot('sandboxes')
  step(`created ${sid}`)

  // The terminal: type, see 42; a lookup the sandbox's egress refuses.
  await page.goto(`${base}/console#/sandboxes/${sid}/terminal`)
  await tid('open-terminal').click()
  const term = tid('terminal')
  await term.locator('.xterm-rows').waitFor({ timeout: 30000 })
  await page.waitForFunction(() => /[#$] ?\s*$/m.test(document.querySelector('[data-testid="terminal"] .xterm-rows')?.innerText || ''),
    null, { timeout: 30000 })
  await term.click()
  await page.keyboard.type('echo $((6*7))')
  await page.keyboard.press('Enter')
  await page.waitForFunction(() => /^42\s*$/m.test(document.querySelector('[data-testid="terminal"] .xterm-rows')?.innerText || ''),
    null, { timeout: 30000 })
  await page.keyboard.type('getent hosts blocked.test.example || echo refused-$((2*3))')
  await page.keyboard.press('Enter')
  await page.waitForFunction(() => /^refused-6\s*$/m.test(document.querySelector('[data-testid="terminal"] .xterm-rows')?.innerText || ''),
    null, { timeout: 30000 })
  await checkA11y('terminal')
  await shot('terminal')
  step('terminal answered 42')

  // Files: upload, list, view, download.
  await tid('tab-files').click()
  await tid('file-browser').waitFor()
  const content = `hello from the browser ${Date.now()}\n`
  await tid('file-upload').setInputFiles({ name: 'upload.txt', mimeType: 'text/plain', buffer: Buffer.from(content) })
  const entry = page.locator('[data-testid="file-entry"][data-path="/root/upload.txt"]')
  await entry.waitFor({ timeout: 30000 })
  await entry.getByText('upload.txt', { exact: true }).first().click()
  await page.waitForFunction((c) => (document.querySelector('[data-testid="file-view"]')?.textContent || '').includes(c.trim()),
    content, { timeout: 15000 })
  const [download] = await Promise.all([page.waitForEvent('download'), entry.locator('[data-testid="file-download"]').click()])
  const chunks = []
  for await (const c of await download.createReadStream()) chunks.push(c)
  assert.equal(Buffer.concat(chunks).toString(), content)
  await checkA11y('files')
  await shot('files')
  step('file uploaded, viewed and downloaded')

  // Snapshots: take one, fork from the tree, the fork is in the list.
  await tid('tab-snapshots').click()
  await tid('take-snapshot').click()
  const node = tid('snapshot-node').first()
  await node.waitFor({ timeout: 60000 })
  const snap = await node.getAttribute('data-snapshot-id')
  assert.match(snap, /^snap_/)
  await tid('snapshot-tree').waitFor()
  await node.locator('[data-testid="fork-snapshot"]').first().click()
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="snapshot-tree"] a, [data-testid="snapshot-tree"] button')]
    .some((e) => /sbx_/.test(e.textContent) && !e.textContent.includes(location.hash.split('/')[2])), null, { timeout: 120000 })
  await checkA11y('snapshots')
  await shot('snapshots')
  await page.goto(`${base}/console#/sandboxes`)
  await page.waitForFunction((known) => [...document.querySelectorAll('[data-testid="sandbox-row"]')]
    .filter((r) => !known.includes(r.dataset.sandboxId)).length >= 2, [...before], { timeout: 60000 })
  const fork = (await tid('sandbox-row').evaluateAll((rows, known) =>
    rows.map((r) => r.dataset.sandboxId).filter((id) => !known.includes(id)), [...before, sid]))[0]
  assert.ok(fork && fork !== sid, 'the fork is not in the list')
  step(`forked ${snap} into ${fork}`)

  // Activity: the refused lookup, and the command log.
  await page.goto(`${base}/console#/sandboxes/${sid}/activity`)
  const denied = page.locator('[data-testid="activity-egress"] [data-action="deny"]').filter({ hasText: 'blocked.test.example' })
  await denied.first().waitFor({ timeout: 30000 })
  await tid('activity-commands').waitFor()
  await checkA11y('activity')
  await shot('activity')
  step('refused egress in the activity view')

  // Templates: build one from a Dockerfile, its log streaming into the page.
  await page.goto(`${base}/console#/templates`)
  await tid('templates-list').waitFor({ timeout: 15000 })
  const tname = `console-df-${Date.now() % 100000}`
  await tid('build-name').fill(tname)
  await tid('build-dockerfile').fill('FROM busybox\nARG WORD=console\nRUN echo built-in-the-$WORD && touch /built\n')
  await tid('build-submit').click()
  await page.waitForFunction(() => (document.querySelector('[data-testid="build-log"]')?.textContent || '').includes('built-in-the-console'),
    null, { timeout: 120000 })
  await page.waitForFunction((n) => (document.querySelector('[data-testid="build-result"]')?.textContent || '').includes('Built template ' + n),
    tname, { timeout: 120000 })
  await page.locator(`[data-testid="template-row"][data-template="${tname}"]`).waitFor({ timeout: 15000 })
  await checkA11y('templates')
  await shot('templates')
  step(`built template ${tname} from a Dockerfile`)

  const violations = await page.evaluate(() => window.__cspViolations)
  assert.deepEqual(violations, [], 'CSP violations')
  assert.deepEqual(foreign, [], 'requests to other origins')
  assert.deepEqual(pageErrors, [], 'page errors')
  const bad = a11y.filter((v) => v.violations.length > 0)
  assert.deepEqual(bad, [], `accessibility violations: ${JSON.stringify(bad)}`)
  console.log(JSON.stringify({ ok: true, sandbox: sid, fork, snapshot: snap, template: tname, steps }))
} finally {
  await browser.close()
}
