// Server-sent events over fetch. EventSource cannot send an Authorization header, and the key
// must not go into the URL, so the stream is read from a fetch body and parsed here.

// Feeds text chunks, calls onEvent({event, data}) for each complete event. Follows the
// WHATWG rules that matter here: "event:"/"data:" fields, one optional space after the
// colon, ":" comment lines (keep-alives), several data lines joined with "\n", CR/LF endings.
export function createSseParser(onEvent) {
  let buf = ''
  let event = ''
  let data = []
  const line = (l) => {
    if (l === '') {
      if (data.length) onEvent({ event: event || 'message', data: data.join('\n') })
      event = ''
      data = []
      return
    }
    if (l.startsWith(':')) return
    const i = l.indexOf(':')
    const name = i < 0 ? l : l.slice(0, i)
    let value = i < 0 ? '' : l.slice(i + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (name === 'event') event = value
    else if (name === 'data') data.push(value)
  }
  return {
    push(chunk) {
      buf += chunk
      for (;;) {
        const m = /\r\n|\r|\n/.exec(buf)
        if (!m) break
        // A lone CR at the very end may be half of a CRLF: wait for the next chunk.
        if (m[0] === '\r' && m.index === buf.length - 1) break
        line(buf.slice(0, m.index))
        buf = buf.slice(m.index + m[0].length)
      }
    },
    end() {
      if (buf) line(buf)
      buf = ''
      line('')
    },
  }
}

// Reads a fetch Response as SSE until it ends (or `signal` aborts).
export async function readSse(res, onEvent) {
  const parser = createSseParser(onEvent)
  const reader = res.body.getReader()
  const decoder = new TextDecoder('utf-8')
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    parser.push(decoder.decode(value, { stream: true }))
  }
  parser.push(decoder.decode())
  parser.end()
}
