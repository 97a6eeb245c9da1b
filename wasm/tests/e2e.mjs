// End-to-end test of the blockwise page in Debian's Chromium (playwright-core; no browser is
// downloaded). Serves wasm/dist on 127.0.0.1, then checks images made by `blockwise build`
// and by sfdisk + mkfs.fat, a 32 GiB sparse image (counting the bytes read through
// Blob.prototype.slice), a compressed image, the planner (whose TOML `blockwise plan` must
// accept with the same layout) and building FAT images from a folder and from dropped files
// (checked with fsck.fat -n and mcopy). Prints measurements; screenshots go to
// target/wasm-screenshots (BLOCKWISE_SCREENSHOTS overrides). Usage: node wasm/tests/e2e.mjs (after wasm/build.sh and
// `cargo build --bin blockwise`).
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';

const wasmDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const root = join(wasmDir, '..');
const dist = join(wasmDir, 'dist');
// The committed screenshots (wasm/screenshots) are refreshed only when asked:
// BLOCKWISE_SCREENSHOTS=wasm/screenshots node wasm/tests/e2e.mjs. A test run leaves the tree clean.
const shots = process.env.BLOCKWISE_SCREENSHOTS || join(root, 'target', 'wasm-screenshots');
const cli = process.env.BLOCKWISE_BIN || join(root, 'target', 'debug', 'blockwise');
const work = mkdtempSync(join(tmpdir(), 'blockwise-e2e-'));
mkdirSync(shots, { recursive: true });

let passed = 0;
let failed = 0;
const measurements = {};
async function step(name, fn) {
  try {
    await fn();
    passed += 1;
    console.log(`ok   ${name}`);
  } catch (e) {
    failed += 1;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}
function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}
const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });

// ------------------------------------------------------------------ fixtures
function fixtures() {
  const aligned = join(work, 'aligned.img');
  writeFileSync(join(work, 'aligned.toml'), `[image]\nsize = "128MiB"\ntable = "mbr"\n\n[[partition]]\nfs = "fat32"\nsize = "48MiB"\nlabel = "BOOT"\n\n[[partition]]\nfs = "ext4"\nsize = "fill"\nlabel = "rootfs"\n`);
  run(cli, ['build', '--quiet', join(work, 'aligned.toml'), '-o', aligned]);

  const misaligned = join(work, 'misaligned.img');
  run('truncate', ['-s', '64M', misaligned]);
  execFileSync('sfdisk', ['-q', misaligned], { input: 'start=63, type=c\n' });
  run('mkfs.fat', ['--offset', '63', misaligned]);

  const big = join(work, 'big32g.img');
  writeFileSync(join(work, 'big.toml'), `[image]\nsize = "32GiB"\ntable = "gpt"\n\n[[partition]]\nfs = "fat32"\nsize = "256MiB"\nlabel = "EFI"\n\n[[partition]]\nfs = "ext4"\nsize = "fill"\n`);
  run(cli, ['build', '--quiet', join(work, 'big.toml'), '-o', big]);

  const gz = join(work, 'os.img.gz');
  writeFileSync(gz, gzipSync(readFileSync(misaligned).subarray(0, 1 << 20)));

  const folder = join(work, 'bootfiles');
  mkdirSync(join(folder, 'overlays'), { recursive: true });
  writeFileSync(join(folder, 'config.txt'), 'arm_64bit=1\nenable_uart=1\n');
  writeFileSync(join(folder, 'cmdline.txt'), 'console=serial0,115200 root=/dev/mmcblk0p2\n');
  const blob = Buffer.alloc(300_000);
  for (let i = 0; i < blob.length; i++) blob[i] = (i * 7 + 3) & 0xff;
  writeFileSync(join(folder, 'overlays', 'test.dtbo'), blob);
  return { aligned, misaligned, big, gz, folder };
}

// ------------------------------------------------------------------ static server
function serve() {
  const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm' };
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    const path = normalize(join(dist, url.pathname === '/' ? 'index.html' : url.pathname));
    if (!path.startsWith(dist)) {
      res.writeHead(403).end();
      return;
    }
    try {
      const body = readFileSync(path);
      res.writeHead(200, { 'content-type': types[extname(path)] || 'application/octet-stream' });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(server)));
}

// ------------------------------------------------------------------ the test
const f = fixtures();
const server = await serve();
const base = `http://127.0.0.1:${server.address().port}/`;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update'],
});
const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1100, height: 900 } });
// Count every byte the page takes out of a Blob/File.
await context.addInitScript(() => {
  window.__slice = { bytes: 0, calls: 0 };
  const orig = Blob.prototype.slice;
  Blob.prototype.slice = function (start, end, type) {
    const size = this.size;
    const clamp = (v, d) => {
      if (v === undefined) return d;
      const n = Math.trunc(Number(v));
      return n < 0 ? Math.max(size + n, 0) : Math.min(n, size);
    };
    const s = clamp(start, 0);
    const e = clamp(end, size);
    window.__slice.bytes += Math.max(e - s, 0);
    window.__slice.calls += 1;
    return orig.call(this, start, end, type);
  };
});
const page = await context.newPage();
const consoleErrors = [];
page.on('pageerror', (e) => consoleErrors.push(String(e)));
page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
const requests = [];
page.on('request', (r) => requests.push(r.url()));

await step('page loads and initialises the wasm module', async () => {
  const t0 = Date.now();
  await page.goto(base);
  await page.waitForFunction(() => window.__ready, null, { timeout: 30_000 });
  measurements.pageLoadMs = Date.now() - t0;
  measurements.wasmInitMs = await page.evaluate(() => window.__ready.initMs);
  assert(await page.isHidden('#loading'), 'the loading note is still shown');
});

async function checkFile(path) {
  await page.evaluate(() => { window.__lastCheck = undefined; window.__slice = { bytes: 0, calls: 0 }; });
  await page.setInputFiles('#check-file', path);
  await page.waitForFunction(() => window.__lastCheck, null, { timeout: 30_000 });
  return page.evaluate(() => ({ ...window.__lastCheck, slice: window.__slice }));
}

await step('Check: an image from `blockwise build` is aligned', async () => {
  const r = await checkFile(f.aligned);
  assert(r.exitCode === 0 && r.aligned, `report: ${JSON.stringify(r)}`);
  const verdict = await page.textContent('#check-verdict');
  assert(/^aligned/.test(verdict), `verdict: ${verdict}`);
  const cells = await page.$$eval('#check-out table.layout .verdict-cell > span:first-child', (s) => s.map((x) => x.textContent));
  assert(cells.length === 2 && cells.every((c) => c === 'aligned'), `cells: ${cells}`);
  const detail = await page.textContent('#check-out table.layout tbody tr:first-child .verdict-cell');
  assert(detail.includes('starts at 4 MiB (sector 8192)'), `detail: ${detail}`);
  assert(await page.$('#check-out svg[role=img]'), 'no drawing');
  const marks = await page.$$eval('#check-out svg line[stroke-width="3"]', (l) => l.map((x) => x.getAttribute('stroke')));
  assert(marks.length >= 4 && marks.every((c) => c === '#1b7f3b'), `marks: ${marks}`);
  await page.screenshot({ path: join(shots, 'check-aligned.png'), fullPage: true });
});

await step('Check: sfdisk start 63 + mkfs.fat --offset 63 is misaligned, with advice', async () => {
  const r = await checkFile(f.misaligned);
  assert(r.exitCode === 1 && !r.aligned, `report: ${JSON.stringify(r)}`);
  const verdict = await page.textContent('#check-verdict');
  assert(verdict.startsWith('NOT OK'), `verdict: ${verdict}`);
  const cell = await page.textContent('#check-out table.layout tbody tr:first-child .verdict-cell');
  assert(cell.startsWith('misaligned') && cell.includes('sector 63') && cell.includes('31.5 KiB past a 4 MiB boundary'), `cell: ${cell}`);
  const codes = await page.$$eval('ul.findings li', (l) => l.map((x) => x.dataset.code));
  assert(codes.includes('partition-not-4k-aligned') && codes.includes('fat-data-not-4k-aligned'), `codes: ${codes}`);
  const advice = await page.textContent('li[data-code=partition-not-4k-aligned]');
  assert(advice.includes('rebuild with a start on a multiple of the erase block'), `advice: ${advice}`);
  const red = await page.$$eval('#check-out svg line[stroke="#b3261e"]', (l) => l.length);
  assert(red >= 1, 'the drawing shows no off-grid mark');
  await page.screenshot({ path: join(shots, 'check-misaligned.png'), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(400); // the drawing is redrawn for the new width
  await page.screenshot({ path: join(shots, 'check-misaligned-phone.png'), fullPage: true });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert(overflow <= 1, `the page is ${overflow}px wider than a phone`);
  await page.setViewportSize({ width: 1100, height: 900 });
});

await step('Check: a 32 GiB sparse image is verified reading < 1 MiB', async () => {
  assert(statSync(f.big).size === 32 * 2 ** 30, 'fixture size');
  const r = await checkFile(f.big);
  assert(r.exitCode === 0 && r.aligned, `report: ${JSON.stringify(r)}`);
  assert(r.slice.bytes < 2 ** 20, `read ${r.slice.bytes} bytes`);
  assert(r.slice.bytes === r.bytesRead, `slice count ${r.slice.bytes} != reported ${r.bytesRead}`);
  measurements.big = { bytesRead: r.slice.bytes, slices: r.slice.calls, verifyMs: Math.round(r.ms * 10) / 10 };
  // Again, warm: the time a user sees on a second file.
  const again = await checkFile(f.big);
  measurements.big.verifyMsWarm = Math.round(again.ms * 10) / 10;
  const stats = await page.textContent('#check-stats');
  assert(stats.includes(`Read ${r.slice.bytes} bytes`), `stats: ${stats}`);
  await page.screenshot({ path: join(shots, 'check-32gib.png'), fullPage: true });
});

await step('Check: a gzip-compressed image is recognised with a clear message', async () => {
  const r = await checkFile(f.gz);
  assert(r.error === 'UnsupportedError', `result: ${JSON.stringify(r)}`);
  const text = await page.textContent('#check-out .error-box');
  assert(text.includes('gzip-compressed') && text.includes('gunzip -k os.img.gz'), `text: ${text}`);
});

await step('tabs work from the keyboard', async () => {
  await page.focus('#tab-check');
  await page.keyboard.press('ArrowRight');
  assert(await page.isVisible('#plan'), 'plan panel not shown');
  assert(await page.evaluate(() => document.activeElement.id) === 'tab-plan', 'focus did not follow');
  await page.keyboard.press('ArrowLeft');
  assert(await page.isVisible('#check'), 'check panel not shown');
});

await step('Plan: the form gives a plan and a TOML that `blockwise plan` accepts with the same layout', async () => {
  await page.click('#tab-plan');
  await page.fill('#plan-form [name=size]', '16GiB');
  await page.selectOption('#plan-form [name=table]', 'gpt');
  await page.selectOption('#plan-form [name=erase-block]', '8MiB');
  const rows = page.locator('#plan-parts .part');
  await rows.nth(0).locator('[name=psize]').fill('512MiB');
  await page.click('#plan-add');
  await rows.nth(1).locator('[name=psize]').fill('4GiB');
  await rows.nth(2).locator('[name=fs]').selectOption('fat32');
  await rows.nth(2).locator('[name=label]').fill('DATA');
  await page.waitForFunction(() => window.__lastPlan && window.__lastPlan.partitions && window.__lastPlan.partitions.length === 3 && window.__lastPlan.partitions[2].filesystem);
  const toml = await page.textContent('#plan-toml');
  assert(toml.includes('size = "16GiB"') && toml.includes('table = "gpt"') && toml.includes('erase-block = "8MiB"'), `toml: ${toml}`);
  const planned = await page.evaluate(() => window.__lastPlan);
  assert(planned.aligned, 'not aligned');
  assert(planned.partitions[0].start_bytes === 8 * 2 ** 20, `first start ${planned.partitions[0].start_bytes}`);
  const verdict = await page.textContent('#plan-verdict');
  assert(verdict.startsWith('aligned: every partition and filesystem region starts on a 8 MiB boundary'), verdict);
  const notes = await page.$$eval('#plan-out .notes li', (l) => l.length);
  assert(notes > 0, 'no explanations shown');
  writeFileSync(join(work, 'planned.toml'), toml);
  const cliPlan = JSON.parse(run(cli, ['plan', '--json', join(work, 'planned.toml')]));
  const shape = (p) => p.partitions.map((x) => [x.start_bytes, x.size_bytes, x.type, x.aligned, JSON.stringify(x.filesystem)]);
  assert(JSON.stringify(shape(cliPlan)) === JSON.stringify(shape(planned)), `CLI ${JSON.stringify(shape(cliPlan))} vs page ${JSON.stringify(shape(planned))}`);
  assert(cliPlan.size_bytes === planned.size_bytes, 'sizes differ');
  await page.screenshot({ path: join(shots, 'plan.png'), fullPage: true });
  // A bad size names its key.
  await rows.nth(1).locator('[name=psize]').fill('4XB');
  await page.waitForFunction(() => window.__lastPlan && window.__lastPlan.error);
  const err = await page.evaluate(() => window.__lastPlan);
  assert(err.error === 'SpecError' && err.message.startsWith('partition[2].size: '), `error: ${JSON.stringify(err)}`);
  await page.screenshot({ path: join(shots, 'plan-error.png'), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await rows.nth(1).locator('[name=psize]').fill('4GiB');
  await page.waitForFunction(() => window.__lastPlan && !window.__lastPlan.error);
  await page.waitForTimeout(400);
  await page.screenshot({ path: join(shots, 'plan-phone.png'), fullPage: true });
  await page.setViewportSize({ width: 1100, height: 900 });
});

function checkFat(img, offset, expect) {
  // fsck.fat cannot start at an offset: check a copy of the partition.
  const part = join(work, 'part.img');
  run('dd', [`if=${img}`, `of=${part}`, 'bs=1M', `skip=${offset / 2 ** 20}`, 'status=none', 'conv=sparse']);
  run('fsck.fat', ['-n', part]);
  for (const [name, want] of Object.entries(expect)) {
    const got = execFileSync('mcopy', ['-n', '-i', part, `::/${name}`, '-']);
    assert(Buffer.compare(got, want) === 0, `${name} differs after mcopy`);
  }
  rmSync(part);
}

await step('Build: a folder becomes an MBR image with FAT32 that fsck.fat and mcopy accept', async () => {
  await page.click('#tab-build');
  await page.setInputFiles('#build-dir', f.folder);
  await page.waitForFunction(() => !document.querySelector('#build-go').disabled);
  const list = await page.textContent('#build-list');
  assert(list.startsWith('3 files'), `list: ${list}`);
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#build-go')]);
  const img = join(work, 'built-mbr.img');
  await download.saveAs(img);
  assert(statSync(img).size === 64 * 2 ** 20, 'size');
  const dump = run('sfdisk', ['--json', img]);
  const start = JSON.parse(dump).partitiontable.partitions[0].start * 512;
  assert(start === 4 * 2 ** 20, `partition start ${start}`);
  checkFat(img, start, {
    'config.txt': readFileSync(join(f.folder, 'config.txt')),
    'overlays/test.dtbo': readFileSync(join(f.folder, 'overlays', 'test.dtbo')),
  });
  const verify = run(cli, ['verify', img]);
  assert(verify.includes('verdict: aligned'), verify);
  measurements.buildMs = await page.evaluate(() => Math.round(window.__lastBuild.ms));
  await page.screenshot({ path: join(shots, 'build.png'), fullPage: true });
});

await step('Build: dropped files become a bare FAT16 image', async () => {
  await page.selectOption('#build-form [name=table]', 'none');
  await page.selectOption('#build-form [name=fs]', 'fat16');
  await page.fill('#build-form [name=size]', '32MiB');
  await page.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(['hello from a drop\n'], 'readme.txt'));
    dt.items.add(new File([new Uint8Array(5000).fill(42)], 'blob.bin'));
    document.querySelector('#build-drop').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  await page.waitForFunction(() => document.querySelector('#build-list').textContent.startsWith('2 files'));
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#build-go')]);
  const img = join(work, 'built-bare.img');
  await download.saveAs(img);
  checkFat(img, 0, { 'readme.txt': Buffer.from('hello from a drop\n'), 'blob.bin': Buffer.alloc(5000, 42) });
});

await step('Build: an image too large for the tab is refused clearly', async () => {
  await page.fill('#build-form [name=size]', '4GiB');
  await page.click('#build-go');
  await page.waitForFunction(() => window.__lastBuild && window.__lastBuild.error);
  const err = await page.evaluate(() => window.__lastBuild);
  assert(err.error === 'UnsupportedError' && err.message.startsWith('image.size: '), JSON.stringify(err));
  assert(await page.isVisible('#build-out .error-box'), 'no error shown');
  await page.screenshot({ path: join(shots, 'build-too-large.png'), fullPage: true });
});

await step('no network request leaves 127.0.0.1 and no script error', async () => {
  const outside = requests.filter((u) => !u.startsWith(base) && !u.startsWith('blob:') && !u.startsWith('data:'));
  assert(outside.length === 0, `requests: ${outside}`);
  assert(consoleErrors.length === 0, `errors: ${consoleErrors.join('\n')}`);
});

await browser.close();
server.close();
rmSync(work, { recursive: true, force: true });

const wasmPath = join(dist, 'pkg', 'blockwise_wasm_bg.wasm');
const wasmBytes = readFileSync(wasmPath);
measurements.wasmBytes = wasmBytes.length;
measurements.wasmGzipBytes = gzipSync(wasmBytes, { level: 9 }).length;
console.log(`measurements: ${JSON.stringify(measurements)}`);
console.log(`  32 GiB sparse image: read ${measurements.big?.bytesRead} bytes in ${measurements.big?.slices} slices, verify ${measurements.big?.verifyMs} ms (warm ${measurements.big?.verifyMsWarm} ms)`);
console.log(`  .wasm: ${measurements.wasmBytes} bytes, ${measurements.wasmGzipBytes} gzipped; page load ${measurements.pageLoadMs} ms (wasm init ${Math.round(measurements.wasmInitMs)} ms)`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
