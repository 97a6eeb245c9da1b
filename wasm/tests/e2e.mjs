// End-to-end test of the blockwise page in Debian's Chromium (playwright-core; no browser is
// downloaded). Serves wasm/dist on 127.0.0.1 and uses the page as people do:
//
// - Check: images from `blockwise build`, sfdisk + mkfs.fat, a truncated GPT image, an
//   overlapping table, a FAT32 with a bad cluster count, a 32 GiB sparse image (bytes read
//   counted in Blob.prototype.slice), containers and junk; the first line ("Safe to flash"),
//   the rows, the drawing and the copy buttons against `blockwise verify`.
// - Plan: the form against `blockwise plan`, inline validation, erase blocks 128 KiB–256 MiB,
//   sizes in bytes/GiB/GB, "Add partition" after a fill row, logical partitions.
// - Build: the default Raspberry Pi plan from two folders, in a Web Worker: fsck.fat -n,
//   e2fsck -fn, sfdisk --verify, the files read back, and the same bytes (image and .bmap)
//   as `blockwise build` of the page's TOML; the main thread keeps drawing frames; Cancel;
//   Save to a file; the renderer's peak memory for a 1 GiB build.
// - Trust: offline after one visit, a blocked .wasm and file:// explained within 5 s, dark
//   mode, a 390 px phone, keyboard only.
//
// Prints measurements; screenshots go to target/wasm-screenshots (BLOCKWISE_SCREENSHOTS
// overrides: BLOCKWISE_SCREENSHOTS=wasm/screenshots refreshes the committed ones).
// Usage: node wasm/tests/e2e.mjs (after wasm/build.sh and `cargo build --bin blockwise`).
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { closeSync, mkdtempSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync, writeSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';

const wasmDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const root = join(wasmDir, '..');
const dist = join(wasmDir, 'dist');
const shots = process.env.BLOCKWISE_SCREENSHOTS || join(root, 'target', 'wasm-screenshots');
const cli = process.env.BLOCKWISE_BIN || join(root, 'target', 'debug', 'blockwise');
const work = mkdtempSync(join(tmpdir(), 'blockwise-e2e-'));
mkdirSync(shots, { recursive: true });
const started = Date.now();

let passed = 0;
let failed = 0;
const measurements = {};
// E2E_ONLY=regex runs only the matching steps (the first, which loads the page, always runs).
const only = process.env.E2E_ONLY ? new RegExp(process.env.E2E_ONLY) : null;
async function step(name, fn) {
  if (only && passed + failed > 0 && !only.test(name)) return;
  const t0 = Date.now();
  try {
    await fn();
    passed += 1;
    console.log(`ok   ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  } catch (e) {
    failed += 1;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}
function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}
const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 26, ...opts });
/** Raw stdout bytes of a command. */
const bytesOf = (cmd, args) => execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 26 });
const have = (tool) => { try { execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }); return true; } catch { return false; } };

// ------------------------------------------------------------------ fixtures
/** Bytes of a deterministic pattern (not all zeros, so holes and data differ). */
function pattern(n, seed) {
  const b = Buffer.alloc(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i += 4) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    b.writeUInt32LE(x, Math.min(i, n - 4));
  }
  return b;
}

/** An MBR with `entries` [type, start LBA, sectors] in an image of `size` bytes. */
function mbrImage(path, size, entries) {
  run('truncate', ['-s', String(size), path]);
  const mbr = Buffer.alloc(512);
  entries.forEach(([type, start, sectors], i) => {
    const e = 0x1be + 16 * i;
    mbr[e + 4] = type;
    mbr.writeUInt32LE(start, e + 8);
    mbr.writeUInt32LE(sectors, e + 12);
  });
  mbr[510] = 0x55;
  mbr[511] = 0xaa;
  const fd = openSync(path, 'r+');
  writeSync(fd, mbr, 0, 512, 0);
  closeSync(fd);
}

function fixtures() {
  const f = {};
  const build = (name, toml) => {
    writeFileSync(join(work, `${name}.toml`), toml);
    const img = join(work, `${name}.img`);
    run(cli, ['build', '--quiet', join(work, `${name}.toml`), '-o', img]);
    return img;
  };
  f.aligned = build('aligned', '[image]\nsize = "128MiB"\ntable = "mbr"\n\n[[partition]]\nfs = "fat32"\nsize = "48MiB"\nlabel = "BOOT"\n\n[[partition]]\nfs = "ext4"\nsize = "fill"\nlabel = "rootfs"\n');

  f.misaligned = join(work, 'misaligned.img');
  run('truncate', ['-s', '64M', f.misaligned]);
  execFileSync('sfdisk', ['-q', f.misaligned], { input: 'start=63, type=c\n' });
  run('mkfs.fat', ['--offset', '63', f.misaligned]);

  // 1 MiB start: 4 KiB aligned but not on the 4 MiB erase block ("yes, but slower").
  f.slower = build('slower', '[image]\nsize = "64MiB"\ntable = "mbr"\n\n[[partition]]\nfs = "fat16"\nsize = "fill"\nstart = "1MiB"\n');

  // A GPT image cut to 700 MiB: partition 2 runs past the end, the backup GPT is gone.
  f.truncated = build('truncated', '[image]\nsize = "1GiB"\ntable = "gpt"\n\n[[partition]]\nfs = "fat32"\nsize = "256MiB"\nlabel = "BOOT"\n\n[[partition]]\nfs = "ext4"\nsize = "fill"\n');
  run('truncate', ['-s', '700M', f.truncated]);

  // Partition 2 starts inside partition 1.
  f.overlap = join(work, 'overlap.img');
  mbrImage(f.overlap, 256 << 20, [[0x0c, 8192, 262144], [0x83, 131072, 262144]]);

  // FAT32 whose sectors per cluster were raised from 8 to 64: 9216 clusters, a FAT16 count.
  f.badcluster = build('badcluster', '[image]\nsize = "300MiB"\ntable = "mbr"\n\n[[partition]]\nfs = "fat32"\nsize = "fill"\nlabel = "BOOT"\n');
  {
    const fd = openSync(f.badcluster, 'r+');
    for (const sector of [0, 6]) writeSync(fd, Buffer.from([64]), 0, 1, (4 << 20) + sector * 512 + 13);
    closeSync(fd);
  }

  f.big = build('big32g', '[image]\nsize = "32GiB"\ntable = "gpt"\n\n[[partition]]\nfs = "fat32"\nsize = "256MiB"\nlabel = "EFI"\n\n[[partition]]\nfs = "ext4"\nsize = "fill"\n');

  // The aligned image in containers: gzip and a one-block xz stream (under a name without
  // .xz: the bytes decide), and blockwise's own seekable zstd and Android sparse outputs.
  f.gz = join(work, 'os.img.gz');
  writeFileSync(f.gz, gzipSync(readFileSync(f.aligned)));
  f.renamed = join(work, 'renamed.img');
  writeFileSync(f.renamed, execFileSync('xz', ['-c', '-0', '-T1'], { input: readFileSync(f.aligned), maxBuffer: 1 << 30 }));
  f.zst = join(work, 'aligned.img.zst');
  run(cli, ['build', '--quiet', join(work, 'aligned.toml'), '-o', f.zst]);
  // A zip holding the image (deflated), as images are often downloaded.
  f.zip = join(work, 'os.zip');
  run('python3', ['-c', 'import sys, zipfile; zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED).write(sys.argv[2], "os.img")', f.zip, f.aligned]);
  f.simg = join(work, 'aligned.simg');
  run(cli, ['build', '--quiet', join(work, 'aligned.toml'), '-o', f.simg]);
  f.bigzst = join(work, 'big32g.img.zst');
  run(cli, ['build', '--quiet', join(work, 'big32g.toml'), '-o', f.bigzst]);
  f.bigsimg = join(work, 'big32g.simg');
  run(cli, ['build', '--quiet', join(work, 'big32g.toml'), '-o', f.bigsimg]);
  // A 32 GiB MBR image in every container people download: blockwise's own seekable zstd,
  // multi-block xz (with its index) and Android sparse outputs, and a gzip file and a
  // deflated zip written in seconds from the sparse image's data ranges (deflate-sparse.py).
  f.mbr32 = build('mbr32g', '[image]\nsize = "32GiB"\ntable = "mbr"\n\n[[partition]]\nfs = "fat32"\nsize = "256MiB"\nlabel = "BOOT"\n\n[[partition]]\nfs = "ext4"\nsize = "fill"\nlabel = "rootfs"\n');
  for (const ext of ['img.xz', 'img.zst', 'simg']) run(cli, ['build', '--quiet', join(work, 'mbr32g.toml'), '-o', join(work, `mbr32g.${ext}`)]);
  run('python3', [join(wasmDir, 'tests', 'deflate-sparse.py'), f.mbr32, join(work, 'mbr32g.img.gz'), join(work, 'mbr32g.zip')]);
  // A qcow2 header: named and refused.
  f.qcow2 = join(work, 'vm.qcow2');
  writeFileSync(f.qcow2, Buffer.concat([Buffer.from('QFI\xfb', 'latin1'), Buffer.from([0, 0, 0, 3]), Buffer.alloc(4088)]));
  f.junk = join(work, 'notes.bin');
  writeFileSync(f.junk, pattern(1 << 20, 7));

  // Two folders for the Raspberry Pi plan, with files a boot and a root filesystem hold.
  // Written with mode 0644/0755 (the page cannot see modes and writes these).
  f.boot = join(work, 'boot');
  f.rootfs = join(work, 'rootfs');
  const files = {
    'boot/config.txt': Buffer.from('arm_64bit=1\nenable_uart=1\n'),
    'boot/cmdline.txt': Buffer.from('console=serial0,115200 root=/dev/mmcblk0p2 rootwait\n'),
    'boot/overlays/test.dtbo': pattern(300_000, 3),
    'boot/kernel8.img': pattern(3_000_000, 4),
    'rootfs/etc/hostname': Buffer.from('raspberrypi\n'),
    'rootfs/etc/os-release': Buffer.from('ID=test\n'),
    'rootfs/usr/lib/libbig.so': pattern(6_000_000, 5),
    'rootfs/usr/share/doc/a file with spaces.txt': Buffer.from('hello\n'),
    'rootfs/var/lib/data/x.bin': pattern(70_000, 6),
  };
  for (const [p, data] of Object.entries(files)) {
    mkdirSync(dirname(join(work, p)), { recursive: true, mode: 0o755 });
    writeFileSync(join(work, p), data, { mode: 0o644 });
  }
  f.files = files;
  // A small folder for quick builds.
  f.small = join(work, 'small');
  mkdirSync(f.small);
  writeFileSync(join(f.small, 'readme.txt'), 'hello\n');
  return f;
}

/** 1 GiB of content in 8 files of 128 MiB (written once, for the memory test). */
function bigContent() {
  const dir = join(work, 'content');
  mkdirSync(dir);
  const chunk = pattern(8 << 20, 11);
  for (let i = 0; i < 8; i++) {
    const fd = openSync(join(dir, `part${i}.bin`), 'w');
    for (let k = 0; k < 16; k++) { chunk[0] = i; chunk[1] = k; writeSync(fd, chunk); }
    closeSync(fd);
  }
  return dir;
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
      res.writeHead(200, { 'content-type': types[extname(path)] || 'application/octet-stream', 'cache-control': 'no-cache' });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(server)));
}

// ------------------------------------------------------------------ process memory
/** Chromium's processes started by this test: [{ pid, type, hwmKiB, rssKiB }]. */
function chromiumProcesses() {
  const parent = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch { /* gone */ }
  }
  const mine = (pid) => { for (let p = pid, n = 0; p > 1 && n < 64; p = parent.get(p), n++) if (p === process.pid) return true; return false; };
  const out = [];
  for (const pid of parent.keys()) {
    if (pid === process.pid || !mine(pid)) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmd.includes('chrom')) continue;
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const kib = (k) => Number((new RegExp(`${k}:\\s+(\\d+)`).exec(status) || [0, 0])[1]);
      const type = (/--type=([a-z-]+)/.exec(cmd) || [null, 'browser'])[1];
      out.push({ pid, type, hwmKiB: kib('VmHWM'), rssKiB: kib('VmRSS') });
    } catch { /* gone */ }
  }
  return out;
}

// ------------------------------------------------------------------ the test
const f = fixtures();
const server = await serve();
const base = `http://127.0.0.1:${server.address().port}/`;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update'],
});
const newContext = (opts = {}) => browser.newContext({ acceptDownloads: true, viewport: { width: 1100, height: 900 }, ...opts });
const context = await newContext();
await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
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
    window.__slice.bytes += Math.max(clamp(end, size) - clamp(start, 0), 0);
    window.__slice.calls += 1;
    return orig.call(this, start, end, type);
  };
});
// …and in the check worker, which reads the File itself (FileReaderSync): the page's
// `new Worker('check-worker.js')` starts a wrapper that counts Blob.prototype.slice there,
// then imports the page's worker script, and adds the count to the worker's answer.
await context.addInitScript(() => {
  const Base = window.Worker;
  window.Worker = class extends Base {
    constructor(url, opts) {
      const abs = new URL(url, location.href).href;
      if (!abs.endsWith('/check-worker.js')) {
        super(url, opts);
        // The last build the page asked for, to build again with another spec.
        if (abs.endsWith('/build-worker.js')) {
          const post = this.postMessage.bind(this);
          this.postMessage = (m, t) => { window.__lastBuildMessage = m; return post(m, t); };
        }
        return;
      }
      const wrapper = `
        const n = { bytes: 0, calls: 0 };
        const slice = Blob.prototype.slice;
        Blob.prototype.slice = function (start, end, type) {
          n.bytes += Math.max(Math.min(end ?? this.size, this.size) - Math.max(start ?? 0, 0), 0);
          n.calls += 1;
          return slice.call(this, start, end, type);
        };
        const post = self.postMessage.bind(self);
        self.postMessage = (m) => post({ ...m, slice: n });
        const early = [];
        self.onmessage = (ev) => early.push(ev);
        await import(${JSON.stringify(abs)});
        for (const ev of early) self.onmessage(ev);`;
      super(URL.createObjectURL(new Blob([wrapper], { type: 'text/javascript' })), opts);
      this.addEventListener('message', (ev) => {
        // The count rides on every message; progress messages carry it so far, the last one
        // (the answer or the error) carries it all.
        if (ev.data && ev.data.slice && ev.data.type !== 'progress') {
          window.__slice.bytes += ev.data.slice.bytes;
          window.__slice.calls += ev.data.slice.calls;
        }
      });
    }
  };
});
const consoleErrors = [];
const requests = [];
function watch(page) {
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('request', (r) => requests.push(r.url()));
  return page;
}
const page = watch(await context.newPage());

async function ready(p, url = base) {
  const t0 = Date.now();
  await p.goto(url);
  await p.waitForFunction(() => window.__ready || window.__bootError, null, { timeout: 30_000 });
  const err = await p.evaluate(() => window.__bootError);
  assert(!err, `boot error: ${err}`);
  return Date.now() - t0;
}

await step('page loads and initialises the wasm module', async () => {
  measurements.pageLoadMs = await ready(page);
  measurements.wasmInitMs = Math.round(await page.evaluate(() => window.__ready.initMs));
  assert(await page.isHidden('#boot-status'), 'the loading note is still shown');
});

async function checkFile(path, p = page, timeout = 30_000) {
  await p.evaluate(() => { window.__lastCheck = undefined; window.__slice = { bytes: 0, calls: 0 }; });
  await p.setInputFiles('#check-file', path);
  await p.waitForFunction(() => window.__lastCheck, null, { timeout });
  return p.evaluate(() => ({ ...window.__lastCheck, slice: window.__slice }));
}
const safeLine = (p = page) => p.textContent('#check-out .safe');
const rowNotes = (index, p = page) => p.$$eval(`#check-out table.layout tr[data-index="${index}"] ul.row-notes li`, (l) => l.map((x) => x.dataset.code));
const rowStatus = (index, p = page) => p.textContent(`#check-out table.layout tr[data-index="${index}"] .status`);

await step('Check: a `blockwise build` image is safe to flash; copy as text/JSON give the CLI\'s output', async () => {
  const r = await checkFile(f.aligned);
  assert(r.exitCode === 0 && r.aligned && r.safe === 'yes', `report: ${JSON.stringify(r)}`);
  const line = await safeLine();
  assert(line.startsWith('Safe to flash: yes — '), `line: ${line}`);
  const cells = await page.$$eval('#check-out table.layout .status', (s) => s.map((x) => x.textContent));
  assert(cells.length === 2 && cells.every((c) => c === 'aligned'), `cells: ${cells}`);
  const detail = await page.textContent('#check-out table.layout tbody tr:first-child .verdict-cell');
  assert(detail.includes('starts at 4 MiB (sector 8192)'), `detail: ${detail}`);
  const marks = await page.$$eval('#check-out svg line[data-mark]', (l) => l.map((x) => x.getAttribute('class')));
  assert(marks.length >= 4 && marks.every((c) => c === 'mark-ok'), `marks: ${marks}`);
  assert(await page.$('#check-out ul.legend'), 'no legend');
  const summary = await page.textContent('#check-out .summary');
  assert(summary.includes('MBR (DOS) partition table'), summary);
  // Copy as JSON / as text: exactly what `blockwise verify [--json]` prints.
  await page.click('#check-out button.copy-json');
  const json = await page.evaluate(() => navigator.clipboard.readText());
  // The page checks against the erase block of its menu (4 MiB); the CLI without
  // --erase-block would infer the image's own and say so (erase_block_source).
  const want = run(cli, ['verify', '--json', '--erase-block', '4MiB', 'aligned.img'], { cwd: work });
  assert(JSON.stringify(JSON.parse(json)) === JSON.stringify(JSON.parse(want)), `JSON differs:\n${json}\nvs\n${want}`);
  await page.click('#check-out button.copy-text');
  const text = await page.evaluate(() => navigator.clipboard.readText());
  const human = run(cli, ['verify', '--erase-block', '4MiB', 'aligned.img'], { cwd: work });
  assert(text.trim() === human.trim(), `text differs:\n${text}\nvs\n${human}`);
  await page.screenshot({ path: join(shots, 'check-aligned.png'), fullPage: true });
});

await step('Check: sfdisk start 63 + mkfs.fat --offset 63 → no, the finding on its row and a red mark', async () => {
  const r = await checkFile(f.misaligned);
  assert(r.exitCode === 1 && !r.aligned && r.safe === 'no', `report: ${JSON.stringify(r)}`);
  const line = await safeLine();
  assert(line.startsWith('Safe to flash: no — because partition 1 starts at sector 63'), `line: ${line}`);
  assert(await rowStatus(1) === 'error', 'row 1 is not marked error');
  const cell = await page.textContent('#check-out table.layout tbody tr:first-child .verdict-cell');
  assert(cell.includes('sector 63') && cell.includes('31.5 KiB past a 4 MiB boundary'), `cell: ${cell}`);
  const codes = await rowNotes(1);
  assert(codes.includes('partition-not-4k-aligned') && codes.includes('fat-data-not-4k-aligned'), `row codes: ${codes}`);
  const advice = await page.textContent('#check-out ul.all-findings li[data-code=partition-not-4k-aligned]');
  assert(advice.includes('rebuild with a start on a multiple of the erase block'), `advice: ${advice}`);
  assert(await page.$$eval('#check-out svg line.mark-bad', (l) => l.length) >= 1, 'the drawing shows no off-grid mark');
  assert(await page.$('#check-out svg rect.seg.error'), 'the partition is not drawn as an error');
  await page.screenshot({ path: join(shots, 'check-misaligned.png'), fullPage: true });
});

await step('Check: 1 MiB start → yes, but slower; with strict → no', async () => {
  const r = await checkFile(f.slower);
  assert(r.safe === 'slower' && r.exitCode === 0, `report: ${JSON.stringify(r)}`);
  const line = await safeLine();
  assert(line.startsWith('Safe to flash: yes, but slower than it could be — because partition 1 starts at sector 2048'), line);
  assert(await rowStatus(1) === 'misaligned', 'row 1 not misaligned');
  await page.check('#check-strict');
  await page.waitForFunction(() => window.__lastCheck && window.__lastCheck.safe === 'no');
  await page.uncheck('#check-strict');
  await page.waitForFunction(() => window.__lastCheck && window.__lastCheck.safe === 'slower');
});

await step('Check: a GPT image cut to 700 MiB → no; partition 2 drawn past the end, its row says so', async () => {
  const r = await checkFile(f.truncated);
  assert(r.safe === 'no' && r.exitCode === 1, `report: ${JSON.stringify(r)}`);
  const line = await safeLine();
  assert(line.startsWith('Safe to flash: no — because') && line.includes('truncated'), line);
  assert(await rowStatus(2) === 'error', 'row 2 not error');
  assert((await rowNotes(2)).includes('partition-past-end'), 'row 2 lacks partition-past-end');
  assert(await page.$('#check-out svg [data-past-end="2"]'), 'no past-the-end part drawn');
  assert(await page.$('#check-out svg [data-error="2"]'), 'the strip of partition 2 is not marked');
  assert(await page.$('#check-out svg line.end-line'), 'no end-of-image line');
  const disk = await page.$$eval('#check-out ul.disk-findings li', (l) => l.map((x) => x.dataset.code));
  assert(disk.includes('gpt-backup-missing'), `disk findings: ${disk}`);
  await page.screenshot({ path: join(shots, 'check-truncated.png'), fullPage: true });
});

await step('Check: overlapping partitions → no; the overlap on the row and drawn', async () => {
  const r = await checkFile(f.overlap);
  assert(r.safe === 'no', `report: ${JSON.stringify(r)}`);
  assert((await rowNotes(2)).includes('partition-overlap'), 'row 2 lacks partition-overlap');
  assert(await page.$('#check-out svg rect.overlap[data-overlap="1,2"]'), 'no overlap drawn');
  assert(await page.$('#check-out svg g[data-index="2"] rect.seg.error'), 'partition 2 not drawn as an error');
  await page.screenshot({ path: join(shots, 'check-overlap.png'), fullPage: true });
});

await step('Check: a FAT32 with a FAT16 cluster count → no; the finding on its row and drawn', async () => {
  const r = await checkFile(f.badcluster);
  assert(r.safe === 'no', `report: ${JSON.stringify(r)}`);
  assert((await rowNotes(1)).includes('fat-cluster-count'), 'row 1 lacks fat-cluster-count');
  assert(await page.$('#check-out svg [data-error="1"]'), 'strip 1 not marked');
  assert(await page.$('#check-out svg g[data-index="1"] rect.seg.error'), 'partition 1 not drawn as an error');
  const line = await safeLine();
  assert(line.includes('clusters'), line);
  await page.screenshot({ path: join(shots, 'check-badcluster.png'), fullPage: true });
});

await step('Check: a 32 GiB sparse image is verified reading < 1 MiB', async () => {
  assert(statSync(f.big).size === 32 * 2 ** 30, 'fixture size');
  const r = await checkFile(f.big);
  assert(r.exitCode === 0 && r.aligned, `report: ${JSON.stringify(r)}`);
  assert(r.slice.bytes < 2 ** 20, `read ${r.slice.bytes} bytes`);
  assert(r.slice.bytes === r.bytesRead, `slice count ${r.slice.bytes} != reported ${r.bytesRead}`);
  measurements.big = { bytesRead: r.slice.bytes, slices: r.slice.calls, verifyMs: Math.round(r.ms * 10) / 10 };
  const again = await checkFile(f.big);
  measurements.big.verifyMsWarm = Math.round(again.ms * 10) / 10;
  await page.screenshot({ path: join(shots, 'check-32gib.png'), fullPage: true });
});

await step('Check: an image in a container (gzip, xz, seekable zstd, Android sparse, zip) gets the raw image\'s report, read in a worker by the CLI\'s decoders', async () => {
  const strip = (json, drop) => { const v = JSON.parse(json); for (const k of drop) delete v[k]; return v; };
  const raw = await checkFile(f.aligned);
  const want = strip(raw.json, ['source']);
  const wantLine = await safeLine();
  measurements.containers = {};
  for (const [name, path, kind] of [['gzip', f.gz, 'gzip'], ['xz', f.renamed, 'xz'], ['zstd', f.zst, 'zstd'], ['sparse', f.simg, 'Android sparse'], ['zip', f.zip, 'zip']]) {
    const r = await checkFile(path);
    assert(!r.error, `${name}: ${JSON.stringify(r)}`);
    assert(r.container === kind, `${name}: container ${r.container}`);
    const got = strip(r.json, ['source', 'container']);
    assert(JSON.stringify(got) === JSON.stringify(want), `${name}: ${JSON.stringify(got)} != ${JSON.stringify(want)}`);
    assert(await safeLine() === wantLine, `${name}: ${await safeLine()}`);
    const stats = await page.textContent('#check-out .check-stats');
    assert(stats.includes(`bytes of ${kind}`), `${name}: ${stats}`);
    const human = await page.textContent('#check-out details pre');
    assert(human.split('\n')[0].includes(`(${kind}`), `${name}: ${human.split('\n')[0]}`);
    measurements.containers[name] = { bytesRead: r.bytesRead, containerBytes: r.containerBytes, ms: Math.round(r.ms) };
  }
  // 32 GiB in a seekable zstd: the seek table and the frames verify asks for, not the image.
  const r = await checkFile(f.bigzst);
  assert(!r.error && r.container === 'zstd', JSON.stringify(r));
  assert(r.bytesRead < 4 * 2 ** 20, `read ${r.bytesRead} bytes of the 32 GiB .img.zst`);
  measurements.containers.big32gZstd = { bytesRead: r.bytesRead, containerBytes: r.containerBytes, ms: Math.round(r.ms) };
  // …and in an Android sparse file: its chunk map, not the image.
  const rawBig = strip((await checkFile(f.big)).json, ['source']);
  for (const [name, path, kind] of [['big32gZstd', f.bigzst, 'zstd'], ['big32gSimg', f.bigsimg, 'Android sparse']]) {
    const b = await checkFile(path);
    assert(!b.error && b.container === kind, JSON.stringify(b));
    assert(b.bytesRead < 4 * 2 ** 20, `read ${b.bytesRead} bytes of the 32 GiB ${name}`);
    assert(JSON.stringify(strip(b.json, ['source', 'container'])) === JSON.stringify(rawBig), `${name}: not the raw image's report`);
    measurements.containers[name] = { bytesRead: b.bytesRead, containerBytes: b.containerBytes, ms: Math.round(b.ms) };
  }
  // A VM disk is named and refused with the command that converts it.
  const q = await checkFile(f.qcow2);
  const text = await page.textContent('#check-out .error-box');
  assert(q.error === 'UnsupportedError' && text.includes('qemu-img convert -O raw vm.qcow2 image.img'), `text: ${text}`);
});

await step('Check: .img.xz, .img.zst, .img.gz, .zip and .simg of a 32 GiB MBR image: the CLI\'s report of the raw image, bytes read counted, the worker\'s memory ≤ 64 MiB', async () => {
  const strip = (json, drop) => { const v = JSON.parse(json); for (const k of drop) delete v[k]; return v; };
  const want = JSON.stringify(strip(run(cli, ['verify', '--json', '--erase-block', '4MiB', f.mbr32]), ['source']));
  const raw = await checkFile(f.mbr32);
  assert(JSON.stringify(strip(raw.json, ['source'])) === want, `raw: ${raw.json} != ${want}`);
  const wantLine = await safeLine();
  measurements.mbr32 = { raw: { bytesRead: raw.bytesRead, ms: Math.round(raw.ms) } };
  // Random access (seek table, xz index, chunk map): < 4 MiB of the file. Streams (gzip, a
  // deflated zip entry) are decoded forward, as far as the last byte verify asks for (gzip to
  // its end first: nothing else says how long the image is); what is held at once is bounded.
  for (const [ext, kind, seekable] of [['img.xz', 'xz', true], ['img.zst', 'zstd', true], ['simg', 'Android sparse', true], ['zip', 'zip', false], ['img.gz', 'gzip', false]]) {
    const path = join(work, `mbr32g.${ext}`);
    await page.evaluate(() => { window.__checkProgress = 0; });
    const r = await checkFile(path, page, 600_000);
    // A whole-stream check (about 30 s for this .img.gz) says how far it is.
    if (ext === 'img.gz') assert(await page.evaluate(() => window.__checkProgress) > 0, 'no progress shown while the .img.gz was read');
    assert(!r.error && r.container === kind && r.seekable === seekable, `${ext}: ${JSON.stringify(r)}`);
    assert(JSON.stringify(strip(r.json, ['source', 'container'])) === want, `${ext}: not the raw image's report: ${r.json}`);
    assert(await safeLine() === wantLine, `${ext}: ${await safeLine()}`);
    assert(r.slice.bytes === r.bytesRead, `${ext}: counted ${r.slice.bytes} bytes taken from the file, the page says ${r.bytesRead}`);
    const size = statSync(path).size;
    if (seekable) assert(r.bytesRead < 4 * 2 ** 20, `${ext}: read ${r.bytesRead} bytes`);
    else assert(r.passes >= 1 && r.bytesRead <= r.passes * size + 2 ** 20, `${ext}: read ${r.bytesRead} bytes in ${r.passes} passes of ${size}`);
    assert(r.workerMemoryBytes > 0 && r.workerMemoryBytes <= 64 * 2 ** 20, `${ext}: the worker's wasm memory grew to ${r.workerMemoryBytes} bytes`);
    const stats = await page.textContent('#check-out .check-stats');
    assert(stats.includes(`Read ${r.bytesRead.toLocaleString('en-US')} bytes`) && stats.includes(`bytes of ${kind}`), `${ext}: ${stats}`);
    measurements.mbr32[ext] = { bytesRead: r.bytesRead, containerBytes: size, passes: r.passes, workerMemoryMiB: Math.round(r.workerMemoryBytes / 2 ** 20), ms: Math.round(r.ms) };
    if (ext === 'img.gz') await page.screenshot({ path: join(shots, 'check-32gib-gz.png'), fullPage: true });
  }
});

await step('Check: a long check shows how far it is, Cancel stops it, a new check replaces a running one', async () => {
  const gz = join(work, 'mbr32g.img.gz');
  await page.evaluate(() => { window.__lastCheck = undefined; });
  await page.setInputFiles('#check-file', gz);
  await page.waitForFunction(() => /of the file read \(pass 1, \d+%\)/.test(document.querySelector('#check-out .checking')?.textContent || ''), null, { timeout: 20_000 });
  await page.screenshot({ path: join(shots, 'check-progress.png') });
  await page.click('#check-out .check-cancel');
  await page.waitForSelector('#check-out .check-cancelled', { timeout: 5_000 });
  const cancelled = await page.evaluate(() => window.__lastCheck);
  assert(cancelled && cancelled.error === 'AbortError', `after Cancel: ${JSON.stringify(cancelled)}`);
  // Started again and replaced at once by a small image: the small one's answer stays.
  await page.setInputFiles('#check-file', gz);
  await page.waitForSelector('#check-out .check-cancel', { timeout: 5_000 });
  const r = await checkFile(f.aligned);
  assert(r.safe === 'yes' && !r.error, `the replacing check: ${JSON.stringify(r)}`);
  await new Promise((res) => setTimeout(res, 1500));
  assert((await safeLine()).startsWith('Safe to flash: yes'), 'the replaced check wrote over the answer');
});

await step('Check: an unrecognised file is called unrecognised, not a bare filesystem', async () => {
  const r = await checkFile(f.junk);
  assert(r.safe === 'no' && r.exitCode === 2, `report: ${JSON.stringify(r)}`);
  const summary = await page.textContent('#check-out .summary');
  assert(summary.includes('unrecognised') && !summary.includes('bare'), summary);
  assert((await safeLine()).includes('not a disk image blockwise recognises'), 'line');
});

await step('Plan: the form gives a plan and a TOML that `blockwise plan` accepts with the same layout', async () => {
  await page.click('#tab-plan');
  await page.fill('#plan-size', '16GiB');
  await page.selectOption('#plan-table', 'gpt');
  await page.selectOption('#plan-erase', '8MiB');
  const rows = page.locator('#plan-parts .part');
  await rows.nth(0).locator('[name=psize]').fill('512MiB');
  await page.click('#plan-add');
  assert(await rows.count() === 3, 'no row added');
  // The new row went before the fill row, and the plan stayed valid.
  assert(await rows.nth(2).locator('[name=psize]').inputValue() === 'fill', 'fill is not last');
  await page.waitForFunction(() => window.__lastPlan && window.__lastPlan.partitions && window.__lastPlan.partitions.length === 3);
  await rows.nth(1).locator('[name=psize]').fill('4GiB');
  await rows.nth(1).locator('[name=fs]').selectOption('fat32');
  await rows.nth(1).locator('[name=label]').fill('DATA');
  await page.waitForFunction(() => window.__lastPlan && window.__lastPlan.partitions && window.__lastPlan.partitions[1].size_bytes === 4 * 2 ** 30);
  const toml = await page.textContent('#plan-toml');
  assert(toml.includes('size = "16GiB"') && toml.includes('table = "gpt"') && toml.includes('erase-block = "8MiB"'), `toml: ${toml}`);
  const planned = await page.evaluate(() => window.__lastPlan);
  assert(planned.aligned, 'not aligned');
  assert(planned.partitions[0].start_bytes === 8 * 2 ** 20, `first start ${planned.partitions[0].start_bytes}`);
  const verdict = await page.textContent('#plan-verdict');
  assert(verdict.startsWith('aligned: every partition and filesystem region starts on a 8 MiB boundary'), verdict);
  assert(await page.$$eval('#plan-out .notes li', (l) => l.length) > 0, 'no explanations shown');
  writeFileSync(join(work, 'planned.toml'), toml);
  const cliPlan = JSON.parse(run(cli, ['plan', '--json', join(work, 'planned.toml')]));
  const shape = (p) => p.partitions.map((x) => [x.start_bytes, x.size_bytes, x.type, x.aligned, JSON.stringify(x.filesystem)]);
  assert(JSON.stringify(shape(cliPlan)) === JSON.stringify(shape(planned)), `CLI ${JSON.stringify(shape(cliPlan))} vs page ${JSON.stringify(shape(planned))}`);
  assert(cliPlan.size_bytes === planned.size_bytes, 'sizes differ');
  const hint = await page.textContent('#plan-size-hint');
  assert(hint.includes('17,179,869,184 bytes') && hint.includes('16 GiB') && hint.includes('17.18 GB'), `size hint: ${hint}`);
  await page.screenshot({ path: join(shots, 'plan.png'), fullPage: true });
});

await step('Plan: a bad field is marked (aria-invalid) with its message beside it', async () => {
  const rows = page.locator('#plan-parts .part');
  await rows.nth(1).locator('[name=psize]').fill('4XB');
  await page.waitForFunction(() => window.__lastPlan && window.__lastPlan.error);
  const err = await page.evaluate(() => window.__lastPlan);
  assert(err.error === 'SpecError' && err.key === 'partition[2].size' && err.message.startsWith('partition[2].size: '), `error: ${JSON.stringify(err)}`);
  assert(await rows.nth(1).locator('[name=psize]').getAttribute('aria-invalid') === 'true', 'field not marked');
  const beside = await rows.nth(1).locator('[name=psize] ~ .field-error').textContent();
  assert(beside.length > 5 && !beside.startsWith('partition[2]'), `message beside: ${beside}`);
  assert(await page.locator('#plan-form [aria-invalid]').count() === 1, 'more than one field marked');
  assert(await page.isDisabled('#plan-build'), 'build is not disabled');
  await page.screenshot({ path: join(shots, 'plan-error.png'), fullPage: true });
  await rows.nth(1).locator('[name=psize]').fill('4GiB');
  await page.waitForFunction(() => window.__lastPlan && !window.__lastPlan.error);
  assert(await page.locator('#plan-form [aria-invalid]').count() === 0, 'mark not cleared');
  await page.fill('#plan-size', '16 parsecs');
  await page.waitForFunction(() => window.__lastPlan && window.__lastPlan.key === 'image.size');
  assert(await page.getAttribute('#plan-size', 'aria-invalid') === 'true', 'device size not marked');
  assert((await page.textContent('#plan-size-err')).length > 5, 'no message beside the device size');
  await page.fill('#plan-size', '16GiB');
  await page.waitForFunction(() => window.__lastPlan && !window.__lastPlan.error);
});

await step('Plan: erase blocks from 128 KiB to 256 MiB; the default plan with a 1 GiB boot partition plans aligned on 256 MiB', async () => {
  await ready(page);
  await page.click('#tab-plan');
  const options = await page.$$eval('#plan-erase option', (o) => o.map((x) => x.value));
  assert(options.length === 12 && options[0] === '128KiB' && options[11] === '256MiB', `options: ${options}`);
  // 256 MiB erase blocks: the FAT needs its reserved erase block and a data area, so 1 GiB.
  await page.locator('#plan-parts .part').nth(0).locator('[name=psize]').fill('1GiB');
  await page.selectOption('#plan-erase', '256MiB');
  await page.waitForFunction(() => window.__lastPlan && window.__lastPlan.erase_block_bytes === 256 * 2 ** 20);
  const p = await page.evaluate(() => window.__lastPlan);
  assert(p.aligned && p.partitions[0].start_bytes === 256 * 2 ** 20 && p.partitions[1].filesystem.stride === 32768, JSON.stringify(p.partitions));
  await page.selectOption('#plan-erase', '128KiB');
  await page.waitForFunction(() => window.__lastPlan && window.__lastPlan.erase_block_bytes === 128 * 1024 && window.__lastPlan.aligned);
});

await step('Plan: more than four MBR partitions show the logical ones inside the extended one', async () => {
  await ready(page);
  await page.click('#tab-plan');
  for (let i = 0; i < 4; i++) await page.click('#plan-add');
  await page.waitForFunction(() => window.__lastPlan && window.__lastPlan.partitions && window.__lastPlan.partitions.length === 6);
  const p = await page.evaluate(() => window.__lastPlan);
  assert(p.extended && p.partitions.filter((x) => x.logical).length === 3, JSON.stringify(p.extended));
  assert(await page.$('#plan-out svg rect[data-role=extended]'), 'no extended partition drawn');
  assert(await page.$$eval('#plan-out table.layout tr.logical', (r) => r.length) === 3, 'logical rows not shown');
  assert((await page.textContent('#plan-extended')).includes('logical partitions 5, 6, 7'), 'no explanation');
  await page.screenshot({ path: join(shots, 'plan-logical.png'), fullPage: true });
});

/** Waits for the build to finish, counting animation frames on the main thread meanwhile. */
async function buildAndWatch(p, start) {
  await p.evaluate(() => {
    window.__frames = { n: 0, last: performance.now(), maxGap: 0 };
    const tick = (t) => {
      const fr = window.__frames;
      fr.maxGap = Math.max(fr.maxGap, t - fr.last);
      fr.last = t;
      fr.n += 1;
      if (!fr.stop) requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  await start();
  await p.waitForFunction(() => window.__lastBuild && (window.__lastBuild.check || window.__lastBuild.error), null, { timeout: 300_000 });
  return p.evaluate(() => { window.__frames.stop = true; return { build: window.__lastBuild, frames: window.__frames }; });
}

async function download(p, selector, path) {
  const [d] = await Promise.all([p.waitForEvent('download', { timeout: 300_000 }), p.click(selector)]);
  if (path) await d.saveAs(path);
  else await d.path();
  await d.delete();
  return d;
}

/** Runs `fn` on partition [start, start + size) of `img`: a read-only loop device where the
 * machine allows one, else a copy of the partition. */
function losetupOrCopy(img, start, size, fn) {
  let dev = null;
  try {
    dev = run('losetup', ['-f', '--show', '-r', '--offset', String(start), '--sizelimit', String(size), img]).trim();
  } catch {
    dev = null;
  }
  if (dev) {
    try { return fn(dev); } finally { run('losetup', ['-d', dev]); }
  }
  const part = join(work, 'part.img');
  run('dd', [`if=${img}`, `of=${part}`, 'bs=1M', `skip=${start / 2 ** 20}`, `count=${size / 2 ** 20}`, 'status=none', 'conv=sparse']);
  try { return fn(part); } finally { rmSync(part); }
}

await step('Build: the default Raspberry Pi plan from two folders, in a worker: fsck-clean, files intact, same bytes as `blockwise build`', async () => {
  await ready(page);
  await page.click('#tab-plan');
  // The default plan (MBR, FAT32 256 MiB "BOOT" + ext4 fill "rootfs") on a 2 GiB card, so
  // that the download stays small; the 8 GiB default is built in the next step.
  await page.fill('#plan-size', '2GiB');
  await page.fill('#plan-timestamp', '1700000000');
  await page.setInputFiles('#plan-parts .part:nth-child(1) [name=folder]', f.boot);
  await page.setInputFiles('#plan-parts .part:nth-child(2) [name=folder]', f.rootfs);
  await page.waitForFunction(() => window.__folders && window.__folders[0] && window.__folders[1] && window.__folders[1].count === 5);
  await page.waitForFunction(() => document.querySelector('#plan-toml').textContent.includes('contents = "rootfs"'));
  const toml = await page.textContent('#plan-toml');
  assert(toml.includes('contents = "boot"') && toml.includes('timestamp = 1700000000'), toml);
  const { build, frames } = await buildAndWatch(page, () => page.click('#plan-build'));
  assert(!build.error, `build failed: ${JSON.stringify(build)}`);
  assert(build.check.safe === 'yes' && build.check.exitCode === 0, `the page's check: ${JSON.stringify(build.check)}`);
  measurements.rpiBuild = { ms: Math.round(build.ms), frames: frames.n, maxFrameGapMs: Math.round(frames.maxGap) };
  // The main thread kept drawing frames while the worker built (a frozen tab gives none).
  assert(frames.n >= 3, `only ${frames.n} frames during the build`);
  const img = join(work, 'page.img');
  await download(page, '#build-download', img);
  await download(page, '#build-download-bmap', `${img}.bmap`);
  const usedToml = await page.textContent('#build-toml');
  // The plan's TOML plus the seed the build derived from the dropped files (the page's trees
  // have no owners or sub-second times, so the CLI would derive another from the folders).
  assert(/^seed = "0x[0-9a-f]+"$/m.test(usedToml), `no seed in the spec used:\n${usedToml}`);
  assert(usedToml.replace(/^seed = "0x[0-9a-f]+"\n/m, '') === toml, 'the spec used is not the plan\'s TOML plus its seed');
  // The CLI, on the copied TOML beside the same folders.
  writeFileSync(join(work, 'sd.toml'), usedToml);
  run(cli, ['build', '--quiet', join(work, 'sd.toml'), '-o', join(work, 'cli.img'), '--bmap', join(work, 'cli.img.bmap')]);
  run('cmp', [img, join(work, 'cli.img')]);
  run('cmp', [`${img}.bmap`, join(work, 'cli.img.bmap')]);
  // The .simg beside it: the CLI's `-o x.simg` byte for byte, and simg2img gives the image.
  const simg = join(work, 'page.simg');
  await download(page, '#build-download-simg', simg);
  run(cli, ['build', '--quiet', join(work, 'sd.toml'), '-o', join(work, 'cli.simg')]);
  run('cmp', [simg, join(work, 'cli.simg')]);
  run('simg2img', [simg, join(work, 'unsparsed.img')]);
  run('cmp', [join(work, 'unsparsed.img'), img]);
  rmSync(join(work, 'unsparsed.img'));
  // The seekable .img.zst, made when asked: the CLI's `-o x.img.zst` byte for byte.
  await page.click('#build-make-zst');
  await page.waitForSelector('#build-download-zst', { timeout: 300_000 });
  await download(page, '#build-download-zst', join(work, 'page.img.zst'));
  run(cli, ['build', '--quiet', join(work, 'sd.toml'), '-o', join(work, 'cli.img.zst')]);
  run('cmp', [join(work, 'page.img.zst'), join(work, 'cli.img.zst')]);
  const table = JSON.parse(run('sfdisk', ['--json', img])).partitiontable;
  assert(table.label === 'dos' && table.partitions.length === 2, JSON.stringify(table));
  // sfdisk --verify exits 0 even when it finds problems: read what it says.
  const verified = spawnSync('sfdisk', ['--verify', img], { encoding: 'utf8' });
  const said = `${verified.stdout}${verified.stderr}`;
  assert(verified.status === 0 && said.includes('No errors detected') && !/\d+ errors? detected/.test(said), `sfdisk --verify: ${said}`);
  const [p1, p2] = table.partitions.map((x) => [x.start * 512, x.size * 512]);
  losetupOrCopy(img, p1[0], p1[1], (dev) => {
    run('fsck.fat', ['-n', dev]);
    for (const [p, data] of Object.entries(f.files).filter(([k]) => k.startsWith('boot/'))) {
      const got = bytesOf('mcopy', ['-n', '-i', dev, `::/${p.slice(5)}`, '-']);
      assert(Buffer.compare(got, data) === 0, `${p} differs after mcopy`);
    }
  });
  losetupOrCopy(img, p2[0], p2[1], (dev) => {
    run('e2fsck', ['-fn', dev]);
    const out = join(work, 'rdump');
    mkdirSync(out);
    run('debugfs', ['-R', `rdump / ${out}`, dev]);
    for (const [p, data] of Object.entries(f.files).filter(([k]) => k.startsWith('rootfs/'))) {
      assert(Buffer.compare(readFileSync(join(out, p.slice(7))), data) === 0, `${p} differs after debugfs rdump`);
    }
    const stat = run('debugfs', ['-R', 'stat /usr/share', dev]);
    assert(/mtime: 0x6553f100/.test(stat), `directory time is not the timestamp: ${stat}`);
  });
  await page.screenshot({ path: join(shots, 'build.png'), fullPage: true });
});

await step('Build: squashfs and EROFS with dm-verity trees from two folders: the CLI\'s image, .simg and root hashes; unsquashfs, fsck.erofs, veritysetup verify', async () => {
  await ready(page);
  await page.click('#tab-plan');
  await page.fill('#plan-size', '64MiB');
  await page.selectOption('#plan-table', 'gpt');
  await page.fill('#plan-timestamp', '1700000000');
  const row = (n) => `#plan-parts .part:nth-child(${n})`;
  // squashfs needs a size in the page's plan (its size is known only once compressed, and the
  // plan is made before the files are read); EROFS's left out is its image's own size.
  for (const [n, fs, size, label, dir] of [[1, 'squashfs', '16MiB', 'apps', f.rootfs], [2, 'erofs', '', 'system', f.boot]]) {
    await page.selectOption(`${row(n)} [name=fs]`, fs);
    await page.fill(`${row(n)} [name=psize]`, size);
    await page.fill(`${row(n)} [name=label]`, label);
    await page.check(`${row(n)} [name=verity]`);
    await page.setInputFiles(`${row(n)} [name=folder]`, dir);
  }
  await page.waitForFunction(() => window.__folders && window.__folders[0] && window.__folders[1] && window.__folders[0].count === 5);
  await page.waitForFunction(() => document.querySelector('#plan-toml').textContent.includes('contents = "boot"'));
  if (await page.isDisabled('#plan-build')) throw new Error(`the plan has an error: ${await page.textContent('#plan-out')}\n${await page.textContent('#plan-toml')}`);
  const { build } = await buildAndWatch(page, () => page.click('#plan-build'));
  assert(!build.error && build.check.safe === 'yes', JSON.stringify(build));
  const img = join(work, 'ro.img');
  await download(page, '#build-download', img);
  await download(page, '#build-download-simg', join(work, 'ro.simg'));
  await download(page, '#build-download-apps-roothash', join(work, 'ro.img.apps.roothash'));
  await download(page, '#build-download-system-roothash', join(work, 'ro.img.system.roothash'));
  writeFileSync(join(work, 'ro.toml'), await page.textContent('#build-toml'));
  run(cli, ['build', '--quiet', join(work, 'ro.toml'), '-o', join(work, 'cli-ro.img')]);
  run(cli, ['build', '--quiet', join(work, 'ro.toml'), '-o', join(work, 'cli-ro.simg')]);
  run('cmp', [img, join(work, 'cli-ro.img')]);
  run('cmp', [join(work, 'ro.simg'), join(work, 'cli-ro.simg')]);
  for (const n of ['apps', 'system']) run('cmp', [join(work, `ro.img.${n}.roothash`), join(work, `cli-ro.img.${n}.roothash`)]);
  const shown = await page.$$eval('#build-roothashes code', (cs) => cs.map((c) => c.textContent));
  assert(shown.length === 2 && shown[0] === readFileSync(join(work, 'ro.img.apps.roothash'), 'utf8').trim(), JSON.stringify(shown));
  const planned = JSON.parse(run(cli, ['plan', '--json', join(work, 'ro.toml')])).partitions;
  const [sq, er] = planned;
  // squashfs with zstd: the page links libzstd (compiled to wasm32), so the same bytes as
  // the CLI's too. The same files, in the page's build worker, with the compression changed.
  writeFileSync(join(work, 'ro-zstd.toml'), readFileSync(join(work, 'ro.toml'), 'utf8').replace(/^fs = "squashfs"$/m, 'fs = "squashfs"\nsquashfs.compression = "zstd"'));
  const zstdBuild = await page.evaluate(async (toml) => {
    const w = new Worker('build-worker.js', { type: 'module' });
    const r = await new Promise((ok) => {
      w.onmessage = (ev) => { if (ev.data.type === 'done' || ev.data.type === 'error') ok(ev.data); };
      w.postMessage({ ...window.__lastBuildMessage, toml });
    });
    w.terminate();
    if (r.type === 'error') return { error: `${r.name}: ${r.message}` };
    const digest = await crypto.subtle.digest('SHA-256', await r.image.arrayBuffer());
    return { sha256: [...new Uint8Array(digest)].map((x) => x.toString(16).padStart(2, '0')).join(''), size: r.image.size };
  }, readFileSync(join(work, 'ro-zstd.toml'), 'utf8'));
  assert(!zstdBuild.error, zstdBuild.error);
  run(cli, ['build', '--quiet', join(work, 'ro-zstd.toml'), '-o', join(work, 'cli-ro-zstd.img')]);
  const cliZstd = readFileSync(join(work, 'cli-ro-zstd.img'));
  assert(cliZstd.readUInt16LE(sq.start_bytes + 20) === 6, 'the CLI\'s squashfs is not zstd-compressed');
  assert(zstdBuild.sha256 === createHash('sha256').update(cliZstd).digest('hex'), `squashfs zstd: the page's image differs from the CLI's (${JSON.stringify(zstdBuild)})`);
  // squashfs: every file listed and extracted equal.
  const out = join(work, 'unsq');
  run('unsquashfs', ['-q', '-n', '-o', String(sq.start_bytes), '-d', out, img]);
  for (const [p, data] of Object.entries(f.files).filter(([k]) => k.startsWith('rootfs/'))) {
    assert(Buffer.compare(readFileSync(join(out, p.slice(7))), data) === 0, `${p} differs after unsquashfs`);
  }
  losetupOrCopy(img, er.start_bytes, er.size_bytes, (dev) => {
    const ex = join(work, 'erofs-out');
    run('fsck.erofs', [`--extract=${ex}`, dev]);
    for (const [p, data] of Object.entries(f.files).filter(([k]) => k.startsWith('boot/'))) {
      assert(Buffer.compare(readFileSync(join(ex, p.slice(5))), data) === 0, `${p} differs after fsck.erofs --extract`);
    }
  });
  for (const [p, name] of [[sq, 'apps'], [er, 'system']]) {
    const v = p.filesystem.verity;
    losetupOrCopy(img, v.data_start_bytes, v.data_blocks * 4096, (dev) => {
      run('veritysetup', ['verify', dev, img, readFileSync(join(work, `ro.img.${name}.roothash`), 'utf8').trim(), `--hash-offset=${v.hash_start_bytes}`]);
    });
  }
  await page.screenshot({ path: join(shots, 'build-readonly.png'), fullPage: true });
});

await step('Build: the default plan at its 8 GiB builds; its .bmap equals `blockwise build --bmap`', async () => {
  await ready(page);
  await page.click('#tab-plan');
  // Only the timestamp changes: older than the files, so every time is clamped to it (the
  // page knows no directory times and file times to the millisecond; see build.rs).
  const ts = '1700000000';
  await page.fill('#plan-timestamp', ts);
  await page.setInputFiles('#plan-parts .part:nth-child(1) [name=folder]', f.boot);
  await page.setInputFiles('#plan-parts .part:nth-child(2) [name=folder]', f.rootfs);
  await page.waitForFunction(() => window.__folders && window.__folders[1] && window.__folders[1].count === 5);
  await page.waitForFunction(() => document.querySelector('#plan-toml').textContent.includes('contents = "rootfs"'));
  const toml = await page.textContent('#plan-toml');
  assert(toml.includes('size = "8GiB"') && toml.includes(`timestamp = ${ts}`), toml);
  const { build } = await buildAndWatch(page, () => page.click('#plan-build'));
  assert(!build.error && build.size === 8 * 2 ** 30 && build.check.safe === 'yes', JSON.stringify(build));
  await download(page, '#build-download-bmap', join(work, 'page8.img.bmap'));
  writeFileSync(join(work, 'sd8.toml'), await page.textContent('#build-toml'));
  run(cli, ['build', '--quiet', join(work, 'sd8.toml'), '-o', join(work, 'cli8.img'), '--bmap', join(work, 'cli8.img.bmap')]);
  run('cmp', [join(work, 'page8.img.bmap'), join(work, 'cli8.img.bmap')]);
  rmSync(join(work, 'cli8.img'));
  measurements.rpi8Build = { ms: Math.round(build.ms) };
});

await step('Build: dropping folders on the drawing fills the partitions; an empty filesystem builds', async () => {
  await ready(page);
  await page.click('#tab-plan');
  await page.fill('#plan-size', '512MiB');
  await page.waitForSelector('#plan-out svg g.dropzone[data-index="1"]');
  // Synthetic drops carry in-memory files (a page cannot fake a dropped folder from disk).
  await page.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(['hello from a drop\n'], 'readme.txt', { lastModified: 1_600_000_000_000 }));
    dt.items.add(new File([new Uint8Array(5000).fill(42)], 'blob.bin', { lastModified: 1_600_000_000_000 }));
    const g = document.querySelector('#plan-out svg g.dropzone[data-index="1"]');
    g.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  await page.waitForFunction(() => window.__folders && window.__folders[0] && window.__folders[0].count === 2 && !window.__folders[1]);
  const { build } = await buildAndWatch(page, () => page.click('#plan-build'));
  assert(!build.error && build.check.safe === 'yes', JSON.stringify(build));
  const img = join(work, 'dropped.img');
  await download(page, '#build-download', img);
  const table = JSON.parse(run('sfdisk', ['--json', img])).partitiontable;
  const [p1, p2] = table.partitions.map((x) => [x.start * 512, x.size * 512]);
  losetupOrCopy(img, p1[0], p1[1], (dev) => {
    run('fsck.fat', ['-n', dev]);
    const got = bytesOf('mcopy', ['-n', '-i', dev, '::/readme.txt', '-']);
    assert(got.toString() === 'hello from a drop\n', 'readme.txt differs');
  });
  losetupOrCopy(img, p2[0], p2[1], (dev) => {
    run('e2fsck', ['-fn', dev]);
    const ls = run('debugfs', ['-R', 'ls -p /', dev]);
    assert(ls.includes('lost+found') && !ls.includes('readme'), ls);
  });
  rmSync(img);
});

await step('Build: Save to a file streams the image into the chosen file (File System Access, here the origin-private file system)', async () => {
  await ready(page);
  await page.click('#tab-plan');
  await page.fill('#plan-size', '64MiB');
  await page.locator('#plan-parts .part').nth(1).locator('button.remove').click();
  await page.locator('#plan-parts .part').nth(0).locator('[name=psize]').fill('fill');
  await page.setInputFiles('#plan-parts .part:nth-child(1) [name=folder]', f.small);
  await page.waitForFunction(() => window.__folders && window.__folders.length === 1 && window.__folders[0]);
  const { build } = await buildAndWatch(page, () => page.click('#plan-build'));
  assert(!build.error, JSON.stringify(build));
  await page.evaluate(() => {
    window.showSaveFilePicker = async () => (await navigator.storage.getDirectory()).getFileHandle('saved.img', { create: true });
  });
  await page.click('#build-save');
  await page.waitForFunction(() => window.__saved !== undefined, null, { timeout: 60_000 });
  const same = await page.evaluate(async () => {
    const file = await (await (await navigator.storage.getDirectory()).getFileHandle('saved.img')).getFile();
    const a = new Uint8Array(await file.arrayBuffer());
    const link = document.querySelector('#build-download');
    const b = new Uint8Array(await (await fetch(link.href)).arrayBuffer());
    return a.length === b.length && a.every((x, i) => x === b[i]);
  });
  assert(same, 'the saved file differs from the download');
});

await step('Build: Cancel stops the worker; nothing is offered', async () => {
  f.content ??= bigContent();
  const content = f.content;
  await ready(page);
  await page.click('#tab-plan');
  await page.fill('#plan-size', '2GiB');
  await page.setInputFiles('#plan-parts .part:nth-child(2) [name=folder]', content);
  await page.waitForFunction(() => window.__folders && window.__folders[1] && window.__folders[1].count === 8);
  await page.click('#plan-build');
  await page.waitForSelector('#build-cancel:not([hidden])');
  await page.waitForFunction(() => document.querySelector('#build-phase').textContent.startsWith('Reading'), null, { timeout: 60_000 });
  await page.click('#build-cancel');
  await page.waitForFunction(() => window.__lastBuild && window.__lastBuild.cancelled);
  assert(await page.isVisible('#build-cancelled'), 'no cancelled note');
  assert(!(await page.$('#build-download')), 'a download is offered after Cancel');
  assert(await page.isEnabled('#build-go'), 'Build is not enabled again');
});

await step('Build: peak renderer memory for a 1 GiB build stays under 1.5 × the content', async () => {
  // A fresh context, so the renderer starts from nothing; the peak is the kernel's VmHWM of
  // each Chromium renderer process of this test (the build's worker runs in the page's
  // renderer), read after the build and its download.
  const earlier = new Set(chromiumProcesses().map((x) => x.pid));
  const ctx = await newContext();
  const p = watch(await ctx.newPage());
  await ready(p);
  await p.click('#tab-plan');
  await p.fill('#plan-size', '2GiB');
  f.content ??= bigContent();
  await p.setInputFiles('#plan-parts .part:nth-child(2) [name=folder]', f.content);
  await p.waitForFunction(() => window.__folders && window.__folders[1] && window.__folders[1].count === 8);
  const { build, frames } = await buildAndWatch(p, () => p.click('#plan-build'));
  assert(!build.error && build.check.safe === 'yes', JSON.stringify(build));
  await download(p, '#build-download');
  const after = chromiumProcesses();
  const content = 2 ** 30;
  // This context's renderer: the renderer processes that did not exist before it.
  const renderers = after.filter((x) => x.type === 'renderer' && !earlier.has(x.pid));
  assert(renderers.length >= 1, `no new renderer process found: ${JSON.stringify(after)}`);
  const peak = Math.max(...renderers.map((x) => x.hwmKiB)) * 1024;
  const browserPeak = Math.max(0, ...after.filter((x) => x.type === 'browser').map((x) => x.hwmKiB)) * 1024;
  measurements.memory = {
    contentBytes: content,
    rendererPeakBytes: peak,
    ratio: Math.round((peak / content) * 1000) / 1000,
    browserProcessPeakBytes: browserPeak,
    rendererPeaksMiB: renderers.map((x) => Math.round(x.hwmKiB / 1024)),
    buildMs: Math.round(build.ms),
    maxFrameGapMs: Math.round(frames.maxGap),
  };
  assert(peak <= 1.5 * content, `renderer peak ${peak} bytes for ${content} bytes of content`);
  await ctx.close();
});

await step('Trust: offline after one visit (service worker)', async () => {
  const own = await serve();
  const url = `http://127.0.0.1:${own.address().port}/`;
  const ctx = await newContext();
  const p = watch(await ctx.newPage());
  await ready(p, url);
  await p.waitForFunction(() => navigator.serviceWorker && navigator.serviceWorker.controller, null, { timeout: 30_000 }).catch(async () => {
    await p.reload();
    await p.waitForFunction(() => navigator.serviceWorker.controller, null, { timeout: 30_000 });
  });
  const closed = new Promise((ok) => own.close(ok));
  own.closeAllConnections();
  await closed;
  await p.reload();
  await p.waitForFunction(() => window.__ready || window.__bootError, null, { timeout: 30_000 });
  assert(await p.evaluate(() => Boolean(window.__ready)), `offline reload failed: ${await p.evaluate(() => window.__bootError)}`);
  await p.click('#tab-plan');
  await p.waitForFunction(() => window.__lastPlan && window.__lastPlan.partitions);
  await ctx.close();
});

await step('Trust: a blocked .wasm and a page opened from file:// are explained within 5 s', async () => {
  const ctx = await newContext();
  const p = await ctx.newPage();
  await p.route('**/*.wasm', (r) => r.abort());
  const t0 = Date.now();
  await p.goto(base);
  await p.waitForFunction(() => window.__bootError, null, { timeout: 10_000 });
  const ms = Date.now() - t0;
  const text = await p.textContent('#boot-status');
  assert(ms < 5000 && /WebAssembly/.test(text), `after ${ms} ms: ${text}`);
  measurements.blockedWasmErrorMs = ms;
  await p.screenshot({ path: join(shots, 'error-wasm-blocked.png') });
  const t1 = Date.now();
  await p.goto(`file://${join(dist, 'index.html')}`);
  await p.waitForFunction(() => window.__bootError, null, { timeout: 10_000 });
  const fileText = await p.textContent('#boot-status');
  assert(Date.now() - t1 < 5000 && fileText.includes('file://'), fileText);
  assert(await p.evaluate(() => document.querySelector('#check').inert), 'the tools are not marked unusable');
  await p.screenshot({ path: join(shots, 'error-file-url.png') });
  await ctx.close();
});

/** Every tab, screenshotted as `prefix-TAB.png` (Check with a truncated image, Build after
 * building a 1 GiB plan); no horizontal overflow. */
async function everyTab(p, prefix) {
  await p.setInputFiles('#check-file', f.truncated);
  await p.waitForFunction(() => document.querySelector('#check-out .safe'));
  await p.click('#tab-plan');
  await p.fill('#plan-size', '1GiB');
  await p.setInputFiles('#plan-parts .part:nth-child(1) [name=folder]', f.boot);
  await p.waitForFunction(() => window.__folders && window.__folders[0]);
  await p.click('#plan-build');
  await p.waitForFunction(() => window.__lastBuild && window.__lastBuild.check, null, { timeout: 120_000 });
  for (const t of ['check', 'plan', 'build']) {
    await p.click(`#tab-${t}`);
    await p.waitForTimeout(250);
    const overflow = await p.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert(overflow <= 1, `${prefix} ${t}: the page is ${overflow}px wider than the window`);
    await p.screenshot({ path: join(shots, `${prefix}-${t}.png`), fullPage: true });
  }
}

await step('Trust: dark mode (prefers-color-scheme) recolours the page and the drawing', async () => {
  const ctx = await newContext({ colorScheme: 'dark' });
  const p = watch(await ctx.newPage());
  await ready(p);
  const bg = await p.evaluate(() => getComputedStyle(document.body).backgroundColor);
  const [r, g, b] = bg.match(/\d+/g).map(Number);
  assert(r + g + b < 150, `background ${bg} is not dark`);
  await everyTab(p, 'dark');
  await ctx.close();
});

await step('Trust: a 390 px phone shows every tab without horizontal overflow', async () => {
  const ctx = await newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  const p = watch(await ctx.newPage());
  await ready(p);
  await everyTab(p, 'phone');
  await ctx.close();
});

await step('Trust: all three tabs by keyboard only', async () => {
  const ctx = await newContext();
  const p = watch(await ctx.newPage());
  await ready(p);
  const active = () => p.evaluate(() => {
    const a = document.activeElement;
    return a ? `${a.tagName.toLowerCase()}#${a.id}${a.name ? `[${a.name}]` : ''}` : '';
  });
  /** Presses Tab (or Shift+Tab) until `pred(active)` holds: the control is reachable by keyboard. */
  const tabTo = async (pred, what, back = false, max = 80) => {
    if (pred(await active())) return;
    for (let i = 0; i < max; i++) {
      await p.keyboard.press(back ? 'Shift+Tab' : 'Tab');
      if (pred(await active())) return;
    }
    throw new Error(`${what} not reached by Tab (last: ${await active()})`);
  };
  /** Opens the focused file input with `key` (Enter as a second try) and chooses `files`. */
  const choose = async (key, files) => {
    for (const k of [key, 'Enter']) {
      const chooser = p.waitForEvent('filechooser', { timeout: 5000 }).catch(() => null);
      await p.keyboard.press(k);
      const c = await chooser;
      if (c) { await c.setFiles(files); return; }
    }
    throw new Error(`no file chooser opened from ${await active()}`);
  };
  // Check: tab to the file input, open it with Space.
  await tabTo((a) => a === 'button#tab-check', 'the Check tab');
  await tabTo((a) => a === 'input#check-file', 'the file input');
  await choose('Space', f.misaligned);
  await p.waitForFunction(() => window.__lastCheck && window.__lastCheck.safe === 'no');
  await tabTo((a) => a.startsWith('select#check-erase'), 'the erase block');
  await p.keyboard.press('ArrowDown');
  await p.waitForFunction(() => window.__lastCheck && window.__lastCheck.ms && document.querySelector('#check-erase').value === '8388608');
  // Plan: arrow keys between tabs, type into the form, add a partition, choose folders.
  await tabTo((a) => a === 'button#tab-check', 'the tab list', true);
  await p.keyboard.press('ArrowRight');
  assert(await p.isVisible('#plan') && await active() === 'button#tab-plan', 'ArrowRight did not open Plan');
  await tabTo((a) => a === 'input#plan-size[size]', 'the device size');
  await p.keyboard.press('Control+A');
  await p.keyboard.type('1GiB');
  await tabTo((a) => a === 'button#plan-add', 'Add partition');
  await p.keyboard.press('Enter');
  await p.waitForFunction(() => window.__lastPlan && window.__lastPlan.partitions && window.__lastPlan.partitions.length === 3 && window.__lastPlan.size_bytes === 2 ** 30);
  await tabTo((a) => a.endsWith('[folder]'), 'a folder input');
  await choose('Space', f.boot);
  await p.waitForFunction(() => window.__folders && window.__folders.some(Boolean));
  await tabTo((a) => a === 'button#plan-build', 'Build this plan');
  await p.keyboard.press('Enter');
  await p.waitForFunction(() => window.__lastBuild && (window.__lastBuild.check || window.__lastBuild.error), null, { timeout: 120_000 });
  assert(await p.isVisible('#build'), 'Build tab not shown');
  const b = await p.evaluate(() => window.__lastBuild);
  assert(b.check && b.check.safe === 'yes', JSON.stringify(b));
  // Build: reach the download by keyboard and take it with Enter.
  await tabTo((a) => a === 'a#build-download', 'the download');
  const [d] = await Promise.all([p.waitForEvent('download'), p.keyboard.press('Enter')]);
  assert(d.suggestedFilename() === 'sd.img', d.suggestedFilename());
  await d.delete();
  await p.screenshot({ path: join(shots, 'keyboard-build.png'), fullPage: true });
  await ctx.close();
});

await step('no network request leaves 127.0.0.1 and no script error', async () => {
  const outside = requests.filter((u) => !u.startsWith('http://127.0.0.1:') && !u.startsWith('blob:') && !u.startsWith('data:') && !u.startsWith('file:'));
  assert(outside.length === 0, `requests: ${outside}`);
  const errors = consoleErrors.filter((e) => !/Failed to load resource: net::ERR_FAILED/.test(e));
  assert(errors.length === 0, `errors: ${errors.join('\n')}`);
});

await browser.close();
server.close();
rmSync(work, { recursive: true, force: true });

const wasmBytes = readFileSync(join(dist, 'pkg', 'blockwise_wasm_bg.wasm'));
measurements.wasmBytes = wasmBytes.length;
measurements.wasmGzipBytes = gzipSync(wasmBytes, { level: 9 }).length;
measurements.e2eSeconds = Math.round((Date.now() - started) / 1000);
console.log(`measurements: ${JSON.stringify(measurements)}`);
const m = measurements;
console.log(`  32 GiB sparse image: read ${m.big?.bytesRead} bytes in ${m.big?.slices} slices, verify ${m.big?.verifyMs} ms (warm ${m.big?.verifyMsWarm} ms)`);
if (m.mbr32) console.log(`  32 GiB MBR image in containers (bytes read of the file, passes, worker memory, ms): ${Object.entries(m.mbr32).map(([k, v]) => `${k} ${v.bytesRead} B${v.passes ? ` ${v.passes} passes` : ''}${v.workerMemoryMiB ? ` ${v.workerMemoryMiB} MiB` : ''} ${v.ms} ms`).join('; ')}`);
console.log(`  .wasm: ${m.wasmBytes} bytes, ${m.wasmGzipBytes} gzipped; page load ${m.pageLoadMs} ms (wasm init ${m.wasmInitMs} ms)`);
if (m.memory) console.log(`  1 GiB build: renderer peak ${(m.memory.rendererPeakBytes / 2 ** 20).toFixed(0)} MiB (${m.memory.ratio} × the content), browser process peak ${(m.memory.browserProcessPeakBytes / 2 ** 20).toFixed(0)} MiB, build ${m.memory.buildMs} ms, longest frame gap ${m.memory.maxFrameGapMs} ms`);
console.log(`${passed} passed, ${failed} failed, ${m.e2eSeconds} s`);
process.exit(failed ? 1 : 0);
