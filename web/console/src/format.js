// Display formats shared by the views. Inputs come from the API and may be missing or odd,
// so each function returns a readable string for anything.
import { el } from './dom.js'

export function age(rfc3339, now = Date.now()) {
  const t = Date.parse(rfc3339)
  if (!Number.isFinite(t)) return ''
  const s = Math.max(0, Math.floor((now - t) / 1000))
  if (s < 60) return s + 's'
  if (s < 3600) return Math.floor(s / 60) + 'm'
  if (s < 86400) return Math.floor(s / 3600) + 'h'
  return Math.floor(s / 86400) + 'd'
}

export function bytes(n) {
  const v = Number(n)
  if (!Number.isFinite(v) || v < 0) return ''
  if (v < 1024) return v + ' B'
  const units = ['KiB', 'MiB', 'GiB', 'TiB']
  let x = v / 1024
  let i = 0
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024
    i += 1
  }
  return (x < 10 ? x.toFixed(1) : Math.round(x)) + ' ' + units[i]
}

// Local time, compact; the exact RFC 3339 string stays available as the title.
export function time(rfc3339) {
  if (!rfc3339) return ''
  const t = Date.parse(rfc3339)
  if (!Number.isFinite(t)) return String(rfc3339)
  const d = new Date(t)
  const pad = (n) => String(n).padStart(2, '0')
  return (
    d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
    pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds())
  )
}

export function timeCell(rfc3339) {
  return el('time', { datetime: rfc3339 || null, title: rfc3339 || null, text: time(rfc3339) })
}

export function metadataText(meta) {
  if (!meta || typeof meta !== 'object') return ''
  return Object.keys(meta)
    .sort()
    .map((k) => k + '=' + String(meta[k]))
    .join(', ')
}

export function octalMode(mode) {
  const v = Number(mode)
  return Number.isFinite(v) ? (v & 0o7777).toString(8).padStart(4, '0') : ''
}

export function str(v) {
  return v === null || v === undefined ? '' : String(v)
}

const STATES = new Set([
  'creating', 'running', 'paused', 'suspending', 'suspended', 'resuming', 'destroying', 'destroyed', 'failed',
])

// State as text in a tinted badge; the class comes from a fixed list, never from the data.
export function stateBadge(state) {
  const badge = el('span', { class: 'badge' })
  setBadge(badge, state)
  return badge
}

export function setBadge(badge, state) {
  const s = str(state)
  const cls = 'badge state-' + (STATES.has(s) ? s : 'unknown')
  if (badge.className !== cls) badge.className = cls
  if (badge.textContent !== s) badge.textContent = s
}
