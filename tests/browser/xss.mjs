// Escape-suite attempts on the web console (tests/security/run.py, console.*): sandbox-
// controlled strings (metadata, a file's name and content, a command line, terminal output)
// hold HTML payloads; the console shows each view they appear in, in Debian's chromium.
// Held when no payload became an element or ran, while every payload was shown as text.
// Controls: the same payload given to innerHTML does create the marked element (so the
// detector works and the strings are live markup), and an inline handler that runs in a page
// without the console's policy is blocked inside the console (its CSP is a second layer).
// Needs CONSOLE_URL, SPACE_API_KEY, SANDBOX, MARK (the payloads' attribute name); prints JSON.
import assert from 'node:assert/strict'
import { chromium } from 'playwright-core'

const base = process.env.CONSOLE_URL
const key = process.env.SPACE_API_KEY
const sid = process.env.SANDBOX
const mark = process.env.MARK
assert.ok(base && key && sid && mark, 'CONSOLE_URL, SPACE_API_KEY, SANDBOX and MARK are required')

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
})
const result = { injected: [], ran: false, shown: {}, csp_violations: [] }
try {
  const page = await browser.newPage()
  await page.addInitScript(() => {
    window.__cspViolations = []
    document.addEventListener('securitypolicyviolation', (e) => window.__cspViolations.push(e.violatedDirective))
  })
  const tid = (id) => page.locator(`[data-testid="${id}"]`)
  await page.goto(`${base}/console`, { waitUntil: 'load' })
  await tid('login-key').fill(key)
  await tid('login-submit').click()
  await tid('new-sandbox').waitFor({ timeout: 15000 })

  // Waits until the page shows `mark` as text, then records whether any element carries it.
  const inspect = async (view) => {
    let shown = false
    try {
      await page.waitForFunction((m) => document.body.innerText.includes(m), mark, { timeout: 20000 })
      shown = true
    } catch { /* recorded below */ }
    result.shown[view] = shown
    const hits = await page.evaluate((m) => document.querySelectorAll(`[${m}]`).length, mark)
    if (hits > 0) result.injected.push(view)
    if (await page.evaluate(() => window.__xss !== undefined)) result.ran = true
  }

  await page.goto(`${base}/console#/sandboxes`)
  await inspect('sandbox list (metadata)')
  await page.goto(`${base}/console#/sandboxes/${sid}/files`)
  await inspect('file browser (file name)')
  const entry = page.locator('[data-testid="file-entry"]').filter({ hasText: mark }).first()
  await entry.getByText(mark, { exact: false }).first().click()
  await page.waitForFunction(() => (document.querySelector('[data-testid="file-view"]')?.textContent || '').length > 0,
    null, { timeout: 15000 }).catch(() => {})
  await inspect('file view (content)')
  await page.goto(`${base}/console#/sandboxes/${sid}/activity`)
  await inspect('activity (command line)')
  await page.goto(`${base}/console#/sandboxes/${sid}/terminal`)
  await tid('open-terminal').click()
  await tid('terminal').locator('.xterm-rows').waitFor({ timeout: 30000 })
  await tid('terminal').click()
  await page.keyboard.type('cat /root/payload.html')
  await page.keyboard.press('Enter')
  await inspect('terminal (output)')
  result.csp_violations = await page.evaluate(() => window.__cspViolations)

  // Control 1: the payload is live markup — given to innerHTML, it makes the marked element.
  result.control_innerhtml_injects = await page.evaluate(([m, p]) => {
    const d = document.createElement('div')
    d.innerHTML = p
    const made = d.querySelector(`[${m}]`) !== null
    return made
  }, [mark, process.env.PAYLOAD])
  // Control 2: an inline handler runs in a page without the console's policy ...
  const plain = await browser.newPage()
  await plain.setContent(`<img src="data:," onerror="window.__inline=1">`)
  await plain.waitForTimeout(300)
  result.control_inline_runs_elsewhere = await plain.evaluate(() => window.__inline === 1)
  // ... and the same markup inside the console is refused by its CSP.
  await page.evaluate(() => {
    const d = document.createElement('div')
    d.innerHTML = '<img src="data:," onerror="window.__inline=1">'
    document.body.append(d)
  })
  await page.waitForTimeout(300)
  result.inline_ran_in_console = await page.evaluate(() => window.__inline === 1)
  result.csp_reports_after_inline = await page.evaluate(() => window.__cspViolations.length)
} finally {
  await browser.close()
}
console.log(JSON.stringify(result))
