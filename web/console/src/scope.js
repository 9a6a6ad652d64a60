// Everything a view starts (timers, in-flight fetches, sockets, listeners) is registered
// with its scope, so leaving the view stops all of it: no refresh timer keeps polling a
// sandbox you navigated away from, and no late answer repaints a view that is gone.

export function createScope() {
  const controller = new AbortController()
  const cleanups = []
  let disposed = false
  const scope = {
    signal: controller.signal,
    get disposed() {
      return disposed
    },
    onDispose(fn) {
      if (disposed) fn()
      else cleanups.push(fn)
    },
    // Runs `fn` now and then `ms` after each run finishes (never two at once), until disposed
    // or until the returned stop() is called. `fn` may be async.
    poll(fn, ms) {
      let timer = null
      let stopped = false
      const tick = async () => {
        timer = null
        if (stopped || disposed) return
        try {
          await fn()
        } catch {
          // Each poller reports its own errors; this only keeps the timer alive.
        } finally {
          if (!stopped && !disposed) timer = setTimeout(tick, ms)
        }
      }
      const stop = () => {
        stopped = true
        if (timer !== null) clearTimeout(timer)
        timer = null
      }
      scope.onDispose(stop)
      tick()
      return stop
    },
    timeout(fn, ms) {
      const t = setTimeout(fn, ms)
      scope.onDispose(() => clearTimeout(t))
      return t
    },
    listen(target, event, fn, opts) {
      target.addEventListener(event, fn, opts)
      scope.onDispose(() => target.removeEventListener(event, fn, opts))
    },
    child() {
      const c = createScope()
      scope.onDispose(() => c.dispose())
      return c
    },
    dispose() {
      if (disposed) return
      disposed = true
      controller.abort()
      while (cleanups.length) {
        try {
          cleanups.pop()()
        } catch {
          // One failing cleanup must not keep the others from running.
        }
      }
    },
  }
  return scope
}
