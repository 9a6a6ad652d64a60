// The end-to-end scripts' steps: each prints `ok <name> (<ms> ms)` or `FAIL <name>: <error>`
// and is kept in `steps` for the summary line the Python side reads.
export const steps = []

export async function step(name, fn) {
  const t0 = performance.now()
  try {
    await fn()
  } catch (e) {
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`)
    throw e
  }
  const ms = Math.round(performance.now() - t0)
  steps.push({ name, ms })
  console.log(`ok   ${name} (${ms} ms)`)
}
