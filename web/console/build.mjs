// node build.mjs OUTDIR — writes OUTDIR/index.html, OUTDIR/app.js and OUTDIR/app.css, and
// nothing else. The server embeds or serves these three files as they are, so the output must
// be self-contained (no source maps, no imports left) and the same bytes for the same input.
import { build } from 'esbuild'
import { copyFile, mkdir, readFile, readdir, rm, stat } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const MAX_BYTES = 1 << 20

// The server's CSP has no 'unsafe-eval', no inline scripts and no other origins: catch here
// what would only fail (quietly) in a browser.
async function checkCsp(outDir) {
  const js = await readFile(join(outDir, 'app.js'), 'utf8')
  const css = await readFile(join(outDir, 'app.css'), 'utf8')
  const html = await readFile(join(outDir, 'index.html'), 'utf8')
  if (/\beval\s*\(|new\s+Function\s*\(/.test(js)) throw new Error('app.js uses eval or new Function')
  if (/@import|url\(\s*['"]?(?:https?:)?\/\//i.test(css)) throw new Error('app.css still imports or loads from elsewhere')
  if (/<script(?![^>]*\bsrc=)/i.test(html) || /<style|\sstyle=|\son[a-z]+=/i.test(html)) {
    throw new Error('index.html has inline script, style or event handlers')
  }
  if (/(?:src|href)=["']?(?:https?:)?\/\//i.test(html)) throw new Error('index.html refers to another origin')
}

async function main() {
  const out = process.argv[2]
  if (!out || process.argv.length > 3) throw new Error('usage: node build.mjs OUTDIR')
  const outDir = resolve(out)
  await mkdir(outDir, { recursive: true })
  // Stale files from an older build must not be served next to the new ones.
  for (const f of ['index.html', 'app.js', 'app.css']) await rm(join(outDir, f), { force: true })

  const common = {
    absWorkingDir: here,
    bundle: true,
    minify: true,
    sourcemap: false,
    legalComments: 'none',
    target: 'es2020',
    write: true,
    logLevel: 'warning',
  }
  await build({
    ...common,
    entryPoints: [join(here, 'src/main.js')],
    outfile: join(outDir, 'app.js'),
    format: 'iife',
    platform: 'browser',
  })
  await build({
    ...common,
    entryPoints: [join(here, 'src/app.css')],
    outfile: join(outDir, 'app.css'),
  })
  await copyFile(join(here, 'index.html'), join(outDir, 'index.html'))
  await checkCsp(outDir)

  const names = (await readdir(outDir)).filter((f) => ['index.html', 'app.js', 'app.css'].includes(f)).sort()
  if (names.length !== 3) throw new Error('expected index.html, app.js and app.css in ' + outDir + ', got ' + names.join(', '))
  let total = 0
  for (const f of names) {
    const { size } = await stat(join(outDir, f))
    total += size
    console.log(f.padEnd(11) + String(size).padStart(9) + ' bytes')
  }
  console.log('total'.padEnd(11) + String(total).padStart(9) + ' bytes')
  if (total > MAX_BYTES) throw new Error('the console is ' + total + ' bytes, over the 1 MiB budget')
}

main().catch((err) => {
  console.error('build.mjs: ' + (err && err.message ? err.message : err))
  process.exit(1)
})
