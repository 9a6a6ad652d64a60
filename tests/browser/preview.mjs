// A real browser on a preview URL (docs/ports.md): Debian's chromium, headless, opens the
// private URL with its ?token= once (the cookie it gets then opens the port), loads the page
// a server inside the sandbox serves, and that page's own JavaScript opens a WebSocket back to
// the same sandbox and writes the echo into the page. Asserts on what the page rendered and
// writes a screenshot. Needs PREVIEW_URL (with ?token=...) and SCREENSHOT (a path).
import assert from 'node:assert/strict'
import { chromium } from 'playwright-core'

const url = process.env.PREVIEW_URL
const shot = process.env.SCREENSHOT
assert.ok(url && shot, 'PREVIEW_URL and SCREENSHOT are required')

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  // Root in CI: chromium's own sandbox needs an unprivileged user. The page is our test's.
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
})
try {
  const page = await browser.newPage()
  const seen = []
  page.on('response', (r) => seen.push(`${r.status()} ${r.url()}`))
  const resp = await page.goto(url, { waitUntil: 'load', timeout: 30000 })
  assert.equal(resp.status(), 200, seen.join('\n'))
  // The token went into a cookie and out of the address bar.
  assert.ok(!page.url().includes('token='), page.url())
  assert.equal(await page.textContent('#title'), 'served from inside the sandbox')
  await page.waitForFunction(() => document.getElementById('echo').textContent.startsWith('echo:'), null,
    { timeout: 30000 })
  assert.equal(await page.textContent('#echo'), 'echo: hello from the page')
  const cookies = await page.context().cookies()
  const c = cookies.find((x) => x.name === 'space_port_token')
  assert.ok(c && c.httpOnly, JSON.stringify(cookies))
  await page.screenshot({ path: shot })
  console.log(JSON.stringify({ ok: true, url: page.url(), responses: seen }))
} finally {
  await browser.close()
}
