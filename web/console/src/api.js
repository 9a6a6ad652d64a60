// The API key and every call to the SPACE API. The key lives only in this tab's
// sessionStorage: it never goes into a URL, a cookie, localStorage or the console, so closing
// the tab forgets it and no other site or tab can read it.

const KEY_NAME = 'space.key'

export function getKey() {
  try {
    return sessionStorage.getItem(KEY_NAME) || ''
  } catch {
    return ''
  }
}

export function setKey(key) {
  sessionStorage.setItem(KEY_NAME, key)
}

export function clearKey() {
  try {
    sessionStorage.removeItem(KEY_NAME)
  } catch {
    // Storage can be disabled; there is then nothing to clear.
  }
}

// An error the API answered with ({code, message}), or one we made up in the same shape for
// a failure that never reached it, so every caller shows errors the same way.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message)
    this.name = 'ApiError'
    this.status = status
    this.code = code
  }
}

const CODE_FOR_STATUS = {
  400: 'invalid_argument',
  401: 'unauthenticated',
  403: 'permission_denied',
  404: 'not_found',
  409: 'conflict',
  413: 'payload_too_large',
  429: 'resource_exhausted',
  500: 'internal',
  503: 'unavailable',
  507: 'resource_exhausted',
}

// Called on a 401 with the key from storage: the key was revoked or expired, so the console
// must go back to the login view rather than fail every call.
let onUnauthenticated = null
export function setUnauthenticatedHandler(fn) {
  onUnauthenticated = fn
}

async function errorFrom(res) {
  let code = CODE_FOR_STATUS[res.status] || 'unknown'
  let message = 'HTTP ' + res.status
  try {
    const text = await res.text()
    try {
      const body = JSON.parse(text)
      if (body && typeof body.code === 'string') code = body.code
      if (body && typeof body.message === 'string') message = body.message
    } catch {
      if (text) message = text.slice(0, 500)
    }
  } catch {
    // The body could not be read; the status line is all we know.
  }
  return new ApiError(res.status, code, message)
}

export function isAbort(err) {
  return err && (err.name === 'AbortError' || (err instanceof DOMException && err.code === 20))
}

// request('/v1/sandboxes', {method, json, body, headers, accept, signal, raw, key})
//   json: sent as a JSON body; body: sent raw (a Blob, File or string).
//   raw: return the Response (for bytes and streams) instead of parsed JSON.
//   key: check this key instead of the stored one (the login view), without the 401 handler.
export async function request(path, opts = {}) {
  const key = opts.key !== undefined ? opts.key : getKey()
  const headers = { Authorization: 'Bearer ' + key, ...(opts.headers || {}) }
  let body = opts.body
  if (opts.json !== undefined) {
    headers['Content-Type'] = 'application/json'
    body = JSON.stringify(opts.json)
  }
  if (opts.accept) headers.Accept = opts.accept
  let res
  try {
    res = await fetch(path, {
      method: opts.method || 'GET',
      headers,
      body,
      signal: opts.signal,
      credentials: 'same-origin',
      cache: 'no-store',
      redirect: 'error',
    })
  } catch (err) {
    if (isAbort(err)) throw err
    // fetch refuses header values outside Latin-1 before sending anything.
    if (err instanceof TypeError && /header/i.test(err.message)) {
      throw new ApiError(0, 'invalid_argument', 'the key contains characters that cannot be sent in a header')
    }
    throw new ApiError(0, 'unavailable', 'could not reach the SPACE server (' + err.message + ')')
  }
  if (!res.ok) {
    const err = await errorFrom(res)
    if (res.status === 401 && opts.key === undefined && onUnauthenticated) onUnauthenticated(err)
    throw err
  }
  if (opts.raw) return res
  if (res.status === 204) return null
  const text = await res.text()
  if (!text) return null
  try {
    return JSON.parse(text)
  } catch {
    throw new ApiError(res.status, 'internal', 'the server answered with something that is not JSON')
  }
}

// "Could not pause sbx_1 (conflict): sandbox is not running" — one wording for every error.
export function describeError(context, err) {
  if (err instanceof ApiError) return context + ' (' + err.code + '): ' + err.message
  return context + ': ' + (err && err.message ? err.message : String(err))
}

export const enc = encodeURIComponent
