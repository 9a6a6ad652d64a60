// Drives SPACE with the unmodified E2B JavaScript SDKs (issue 6, "How we will know").
// Needs E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY pointing at `space dev`. Prints one
// line per step with its wall time; exits non-zero at the first failed check.
// E2E_RUNTIME=vm runs every sandbox on the vm runtime (metadata `space.runtime`, docs/e2b.md).
import assert from 'node:assert/strict'
import http from 'node:http'
import { step, steps } from './steps.mjs'
import { Sandbox, CommandExitError } from 'e2b'
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'

const runId = `run${process.pid}x${Date.now()}`
const runtime = process.env.E2E_RUNTIME || ''
const runtimeMd = runtime ? { 'space.runtime': runtime } : {}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
async function until(what, cond, timeoutMs = 10000) {
  const end = Date.now() + timeoutMs
  while (Date.now() < end) {
    if (await cond()) return
    await sleep(50)
  }
  throw new Error(`timed out waiting for ${what}`)
}

const t0 = performance.now()
let sbx
const dir = '/home/user/e2e'

await step('create with metadata and envs', async () => {
  sbx = await Sandbox.create('base', {
    metadata: { suite: 'e2b-e2e', run: runId, ...runtimeMd },
    envs: { E2E_VAR: 'hello-env' },
    timeoutMs: 120_000,
  })
  assert.match(sbx.sandboxId, /^sbx_/)
})

if (runtime === 'vm') {
  await step('the sandbox is a VM: its own kernel, booted by SPACE', async () => {
    // An ns sandbox reads the host's command line here; only a SPACE guest has SPACE_VM=1.
    const r = await sbx.commands.run('cat /proc/cmdline; uname -r')
    assert.match(r.stdout, /SPACE_VM=1/)
    assert.notEqual(r.stdout.trim().split('\n').pop(), process.env.E2E_HOST_KERNEL)
    assert.equal((await sbx.getInfo()).metadata['space.runtime'], 'vm')
  })
}

await step('commands.run: exit code, stdout, stderr, default user', async () => {
  const r = await sbx.commands.run('echo $E2E_VAR; echo oops >&2; whoami; pwd')
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'hello-env\nuser\n/home/user\n')
  assert.equal(r.stderr, 'oops\n')
  const env = await sbx.commands.run('echo $A-$B', { envs: { A: '1', B: '2' }, cwd: '/tmp' })
  assert.equal(env.stdout, '1-2\n')
  const root = await sbx.commands.run('id -u', { user: 'root' })
  assert.equal(root.stdout, '0\n')
})

await step('commands.run: a failing command raises', async () => {
  await assert.rejects(sbx.commands.run('echo partial; exit 3'), (e) => {
    assert.ok(e instanceof CommandExitError, `got ${e}`)
    assert.equal(e.exitCode, 3)
    assert.equal(e.stdout, 'partial\n')
    return true
  })
})

await step('background command streams output and takes stdin', async () => {
  let seen = ''
  const h = await sbx.commands.run('while read line; do echo "got:$line"; done; echo bye', {
    background: true,
    stdin: true,
    onStdout: (d) => { seen += d },
  })
  assert.ok(h.pid > 0)
  const listed = await sbx.commands.list()
  assert.ok(listed.some((p) => p.pid === h.pid && p.args.includes('-c')), JSON.stringify(listed))
  await sbx.commands.sendStdin(h.pid, 'one\n')
  await until('first echo', () => seen.includes('got:one\n'))
  await sbx.commands.sendStdin(h.pid, 'two\n')
  await until('second echo', () => seen.includes('got:two\n'))
  await sbx.commands.closeStdin(h.pid)
  const r = await h.wait()
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'got:one\ngot:two\nbye\n')

  const sleeper = await sbx.commands.run('sleep 600', { background: true })
  assert.equal(await sbx.commands.kill(sleeper.pid), true)
  await assert.rejects(sleeper.wait(), (e) => e instanceof CommandExitError)
  assert.equal(await sbx.commands.kill(999999), false)
})

await step('files: write/read/list/exists/makeDir/rename/remove/getInfo', async () => {
  const w = await sbx.files.write(`${dir}/hello.txt`, 'hello file')
  assert.equal(w.path, `${dir}/hello.txt`)
  assert.equal(await sbx.files.read(`${dir}/hello.txt`), 'hello file')
  const bytes = await sbx.files.read(`${dir}/hello.txt`, { format: 'bytes' })
  assert.equal(bytes.length, 10)
  await sbx.files.write([
    { path: `${dir}/multi/a.txt`, data: 'A' },
    { path: `${dir}/multi/b.txt`, data: 'B' },
  ])
  assert.equal(await sbx.files.read('e2e/multi/b.txt'), 'B') // relative to /home/user
  const names = (await sbx.files.list(dir)).map((e) => e.name).sort()
  assert.deepEqual(names, ['hello.txt', 'multi'])
  assert.equal(await sbx.files.exists(`${dir}/hello.txt`), true)
  assert.equal(await sbx.files.exists(`${dir}/nope.txt`), false)
  assert.equal(await sbx.files.makeDir(`${dir}/sub`), true)
  assert.equal(await sbx.files.makeDir(`${dir}/sub`), false)
  const moved = await sbx.files.rename(`${dir}/hello.txt`, `${dir}/sub/renamed.txt`)
  assert.equal(moved.path, `${dir}/sub/renamed.txt`)
  const info = await sbx.files.getInfo(`${dir}/sub/renamed.txt`)
  assert.equal(info.type, 'file')
  assert.equal(info.size, 10)
  assert.equal(info.owner, 'user')
  assert.ok(info.modifiedTime instanceof Date)
  // What the SDK wrote as `user` is user's: a command may write into it.
  const r = await sbx.commands.run(`echo more >> ${dir}/sub/renamed.txt && stat -c %U ${dir}/sub ${dir}/multi`)
  assert.equal(r.stdout, 'user\nuser\n')
  await sbx.files.remove(`${dir}/multi`)
  assert.equal(await sbx.files.exists(`${dir}/multi`), false)
  await assert.rejects(sbx.files.read(`${dir}/missing.txt`))
})

await step('watchDir sees changes (inotify, recursive)', async () => {
  const events = []
  const has = (name, type) => events.some((e) => e.name === name && e.type === type)
  const w = await sbx.files.watchDir(dir, (e) => events.push(e), { recursive: true })
  // Created and removed at once: inotify reports both (a poller could miss the pair).
  await sbx.files.write(`${dir}/watched.txt`, 'x')
  await sbx.commands.run(`rm ${dir}/watched.txt && mkdir ${dir}/deep`)
  await until('create and remove', () => has('watched.txt', 'create') && has('watched.txt', 'remove'))
  await until('the new directory', () => has('deep', 'create'))
  // A directory made after the watch started is watched too.
  await sbx.commands.run(`echo y > ${dir}/deep/inner.txt`)
  await until('a change below', () => has('deep/inner.txt', 'create'))
  await w.stop()
})

await step('pty: create, sendInput, resize, kill', async () => {
  let out = ''
  const dec = new TextDecoder()
  const enc = new TextEncoder()
  const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d, { stream: true }) } })
  assert.ok(term.pid > 0)
  await sbx.pty.sendInput(term.pid, enc.encode('tty; stty size; echo "user=$(whoami)"\n'))
  await until('tty, size and user', () => /\/dev\/pts\/\d+/.test(out) && out.includes('24 80') && out.includes('user=user'))
  await sbx.pty.resize(term.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(term.pid, enc.encode('stty size\n'))
  await until('the new size', () => out.includes('30 100'), 10000).catch((e) => { throw new Error(`${e.message}; output: ${JSON.stringify(out)}`) })
  const listed = await sbx.commands.list()
  assert.ok(listed.some((p) => p.pid === term.pid && p.cmd === '/bin/bash'), JSON.stringify(listed))
  assert.equal(await sbx.pty.kill(term.pid), true)
  await assert.rejects(term.wait(), (e) => e instanceof CommandExitError)
  assert.equal(await sbx.pty.kill(term.pid), false)
})

await step('Sandbox.list finds it (metadata filter, paging)', async () => {
  const pager = Sandbox.list({ query: { metadata: { run: runId }, state: ['running'] }, limit: 10 })
  const items = await pager.nextItems()
  assert.deepEqual(items.map((s) => s.sandboxId), [sbx.sandboxId])
  assert.equal(items[0].metadata.suite, 'e2b-e2e')
  assert.equal(items[0].state, 'running')
  assert.equal(pager.hasNext, false)
  const none = await Sandbox.list({ query: { metadata: { run: 'no such run' } } }).nextItems()
  assert.equal(none.length, 0)
})

await step('setTimeout', async () => {
  const before = await sbx.getInfo()
  await sbx.setTimeout(300_000)
  const after = await sbx.getInfo()
  assert.ok(after.endAt.getTime() > before.endAt.getTime(), `${after.endAt} > ${before.endAt}`)
})

await step('getMetrics reports live cgroup figures', async () => {
  await sbx.commands.run('python3 -c "x = bytearray(64 << 20); import time; time.sleep(0.2)" &')
  const metrics = await sbx.getMetrics()
  assert.equal(metrics.length, 1)
  const m = metrics[0]
  assert.ok(m.memUsed > 1 << 20 && m.memUsed <= m.memTotal, JSON.stringify(m))
  assert.equal(m.memTotal, 512 * 1024 * 1024)
  assert.ok(m.cpuCount >= 1 && m.cpuUsedPct >= 0 && m.cpuUsedPct <= 100, JSON.stringify(m))
  assert.ok(m.diskTotal > 0 && m.diskUsed >= 0, JSON.stringify(m))
})

await step('getHost reaches a server started in the sandbox', async () => {
  const server = await sbx.commands.run('cd /home/user/e2e && python3 -m http.server 8080 --bind 127.0.0.1', { background: true })
  const host = sbx.getHost(8080)
  assert.match(host, /^8080-sbx_[A-Za-z0-9]+\.localhost:\d+$/)
  // Browsers resolve *.localhost to loopback themselves; Node asks the system resolver, which
  // here does not, so the lookup is the browser's. The Host header is what the URL says.
  const get = () => new Promise((resolve, reject) => {
    const loopback = (h, o, cb) => (o && o.all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4))
    http.get(new URL(`http://${host}/sub/renamed.txt`), { lookup: loopback }, (res) => {
      let body = ''
      res.on('data', (d) => { body += d })
      res.on('end', () => resolve({ status: res.statusCode, body }))
    }).on('error', reject)
  })
  let got
  await until('the server answers through getHost', async () => {
    got = await get()
    return got.status === 200
  }, 60000)
  assert.equal(got.body, 'hello filemore\n')
  await sbx.commands.kill(server.pid)
})

await step('pause', async () => {
  assert.equal(await sbx.pause(), true)
  assert.equal((await sbx.getInfo()).state, 'paused')
  assert.equal(await sbx.isRunning(), false)
})

await step('connect resumes it with files intact', async () => {
  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await again.getInfo()).state, 'running')
  assert.equal(await again.files.read(`${dir}/sub/renamed.txt`), 'hello filemore\n')
  assert.equal((await again.commands.run('echo $E2E_VAR')).stdout, 'hello-env\n')
})

await step('kill', async () => {
  assert.equal(await sbx.kill(), true)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  const left = await Sandbox.list({ query: { metadata: { run: runId } } }).nextItems()
  assert.equal(left.length, 0)
})

let ci
await step('code interpreter: create', async () => {
  ci = await CodeSandbox.create({ metadata: { run: runId, ...runtimeMd } })
})

await step('runCode keeps a variable between two calls', async () => {
  const first = await ci.runCode('x = 41\nprint("set x")')
  assert.equal(first.error, undefined)
  assert.deepEqual(first.logs.stdout, ['set x\n'])
  const second = await ci.runCode('x + 1')
  assert.equal(second.text, '42')
  const err = await ci.runCode('1 / 0')
  assert.equal(err.error.name, 'ZeroDivisionError')
  const ctx = await ci.createCodeContext()
  const isolated = await ci.runCode('"x" in globals()', { context: ctx })
  assert.equal(isolated.text, 'False')
})

await step('code interpreter: kill', async () => {
  assert.equal(await ci.kill(), true)
})

console.log(JSON.stringify({ ok: true, total_ms: Math.round(performance.now() - t0), steps }))
