// Builds a template with the unmodified E2B SDK's Template builder against SPACE (issue 24,
// item 7) and starts a sandbox from it. Needs E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY.
// Prints one line per step; exits non-zero at the first failed check.
import assert from 'node:assert/strict'
import { step, steps } from './steps.mjs'
import { Template, Sandbox, BuildError, waitForFile } from 'e2b'

const runId = `run${process.pid}x${Date.now()}`
const name = 'e2e-sdk-template'
const context = new URL('./template-context', import.meta.url).pathname

// The last RUN differs per build, so it always runs; everything before it may be cached.
const recipe = (last) =>
  Template({ fileContextPath: context })
    .fromTemplate('base')
    .runCmd('echo built > /opt/built.txt')
    .copy('app/', '/opt/app/')
    .copy('config.txt', '/opt/config.txt', { mode: 0o600 })
    .setEnvs({ APP_ENV: 'e2e', APP_RUN: runId })
    .setWorkdir('/opt/app')
    .setUser('user')
    .runCmd(`echo ${last} > /home/user/last.txt`)
    .setStartCmd('sh -c "echo started > /tmp/started; exec sleep 100000"', waitForFile('/tmp/started'))

const logs = (into) => (entry) => into.push(entry.message)

let first
await step('Template.build: run, copy, env, workdir, user, start and ready', async () => {
  const seen = []
  const info = await Template.build(recipe(`${runId}-1`), name, { onBuildLogs: logs(seen) })
  assert.equal(info.name, name)
  assert.match(info.buildId, /^bld_/)
  assert.ok(seen.some((m) => /template e2e-sdk-template built: sha256:/.test(m)), seen.join('\n'))
  first = seen
})

await step('Sandbox.create(name) gets all of it, and its start command ran', async () => {
  const sbx = await Sandbox.create(name, { timeoutMs: 120_000 })
  try {
    const r = await sbx.commands.run(
      'cat /opt/built.txt /opt/app/main.py /home/user/last.txt; echo "$APP_ENV $APP_RUN"; cat /tmp/started; ' +
        'stat -c "%U %a" /opt/app/main.py /opt/config.txt',
    )
    assert.equal(
      r.stdout,
      `built\nprint("hello from the template")\n${runId}-1\ne2e ${runId}\nstarted\nroot 644\nroot 600\n`,
    )
    assert.equal((await sbx.commands.run('python3 main.py', { cwd: '/opt/app' })).stdout, 'hello from the template\n')
  } finally {
    await sbx.kill()
  }
})

await step('a rebuild that changes only the last step runs only that step', async () => {
  const seen = []
  await Template.build(recipe(`${runId}-2`), name, { onBuildLogs: logs(seen) })
  const cached = seen.filter((m) => /^step \d+\/\d+ \w+: cached/.test(m))
  const ran = seen.filter((m) => /^step \d+\/\d+ \w+: running/.test(m))
  assert.ok(cached.length >= 6, seen.join('\n'))
  assert.equal(ran.length, 2, seen.join('\n')) // the changed RUN, then the start/ready layer
  assert.match(ran[0], /run: running/)
  const sbx = await Sandbox.create(name)
  try {
    assert.equal((await sbx.commands.run('cat /home/user/last.txt')).stdout, `${runId}-2\n`)
  } finally {
    await sbx.kill()
  }
  assert.ok(first.length > 0)
})

await step('a failing step fails the build with its step and exit code', async () => {
  const broken = Template({ fileContextPath: context }).fromTemplate('base').runCmd('echo partial; exit 7')
  await assert.rejects(Template.build(broken, `${name}-broken`), (e) => {
    assert.ok(e instanceof BuildError, `got ${e}`)
    assert.match(e.message, /step 1 \(run\) exited with code 7/)
    return true
  })
})

await step('what does not map is refused with a reason', async () => {
  const image = Template({ fileContextPath: context }).fromImage('python:3.12').runCmd('true')
  await assert.rejects(Template.build(image, `${name}-image`), (e) => {
    assert.ok(e instanceof BuildError, `got ${e}`)
    assert.match(e.message, /fromImage .* is not supported/)
    return true
  })
})

console.log(JSON.stringify({ ok: true, steps }))
