// The console-wide status line and error area. They exist from the first paint and only their
// text changes, which is what makes screen readers announce them (a live region inserted
// together with its text is often not read out).
import { el, setText } from './dom.js'
import { describeError } from './api.js'

let statusEl = null
let alertEl = null

export function noticeArea() {
  statusEl = el('p', { class: 'status', role: 'status', 'aria-live': 'polite', testid: 'status' })
  alertEl = el('p', { class: 'alert', role: 'alert', 'aria-live': 'assertive', testid: 'error' })
  return el('div', { class: 'notices' }, statusEl, alertEl)
}

// The latest news wins: a success replaces an earlier error and the other way round, so the
// page never shows a stale "failed" next to a newer "done". showError('') only clears.
export function showStatus(text) {
  if (statusEl) setText(statusEl, text)
  if (alertEl && text) setText(alertEl, '')
}

export function showError(context, err) {
  if (!alertEl) return
  const text = err === undefined ? context : describeError(context, err)
  setText(alertEl, text)
  if (statusEl && text) setText(statusEl, '')
}

export function clearNotices() {
  if (statusEl) setText(statusEl, '')
  if (alertEl) setText(alertEl, '')
}
