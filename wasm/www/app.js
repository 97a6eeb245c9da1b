// The page: Check, Plan and Build over the blockwise wasm module. No framework. Every number,
// verdict and finding comes from the Rust core (verify, plan, prepareBuild, sizeInfo,
// suggestPartition, eraseBlockChoices); this file only draws it and moves files around.
import init, { plan, verify, isContainer, version, sizeInfo, eraseBlockChoices, suggestPartition } from './pkg/blockwise_wasm.js';
import { drawing, legend, fmtSize } from './draw.js';

const $ = (sel, root = document) => root.querySelector(sel);

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

/** replaceChildren without the nulls of optional parts. */
function put(target, ...children) {
  target.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

function errorBox(e) {
  const name = e && e.name ? e.name : 'Error';
  return el('p', { class: 'error-box', role: 'alert' }, el('strong', {}, `${name}: `), e && e.message ? e.message : String(e));
}

const thousands = (n) => Number(n).toLocaleString('en-US');

// ---------------------------------------------------------------- tabs
const tabs = ['check', 'plan', 'build'];
function selectTab(name, focus) {
  for (const t of tabs) {
    const on = t === name;
    const b = $(`#tab-${t}`);
    b.setAttribute('aria-selected', String(on));
    b.tabIndex = on ? 0 : -1;
    $(`#${t}`).hidden = !on;
    if (on && focus) b.focus();
  }
  if (name === 'plan') updatePlan();
  if (name === 'build') renderBuildParts();
}
for (const t of tabs) {
  const b = $(`#tab-${t}`);
  b.addEventListener('click', () => selectTab(t));
  b.addEventListener('keydown', (ev) => {
    const i = tabs.indexOf(t);
    const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[ev.key];
    if (next === undefined) return;
    ev.preventDefault();
    selectTab(tabs[(next + tabs.length) % tabs.length], true);
  });
}

// ---------------------------------------------------------------- the layout table
const GPT_TYPES = {
  'C12A7328-F81F-11D2-BA4B-00A0C93EC93B': 'EFI system',
  'EBD0A0A2-B9E5-4433-87C0-68B6B72699C7': 'Microsoft basic data',
  '0FC63DAF-8483-4772-8E79-3D69D8477DE4': 'Linux filesystem',
  '0657FD6D-A4AB-43C4-84E5-0933C84B4F4F': 'Linux swap',
  '4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709': 'Linux root (x86-64)',
  'B921B045-1DF0-41C3-AF44-4C6F280D3FAE': 'Linux root (ARM64)',
  '21686148-6449-6E6F-744E-656564454649': 'BIOS boot',
};
function typeOf(p) {
  const t = String(p.type).toUpperCase();
  if (GPT_TYPES[t]) return el('span', { title: t }, GPT_TYPES[t]);
  if (t.length > 12) return el('span', { title: t }, `${t.slice(0, 8)}…`);
  return p.type;
}

function fsOf(p) {
  const f = p.filesystem;
  if (!f) return p.content === 'none' ? '—' : p.content;
  const label = f.label ? ` "${f.label}"` : '';
  if (f.fat_start_bytes !== undefined) return `${f.kind}${label}, ${fmtSize(f.cluster_bytes)} clusters`;
  const verity = f.verity ? ', dm-verity tree after it' : '';
  if (f.block_bytes !== undefined && f.stride !== undefined) return `${f.kind}${label}, ${f.block_bytes} B blocks, stride ${f.stride}`;
  if (f.block_bytes !== undefined) return `${f.kind}${label}, ${f.block_bytes} B blocks${f.compression && f.compression !== 'none' ? `, ${f.compression}` : ''}${verity}`;
  return `${f.kind}${f.aligned === null ? ' (not checked)' : ''}`;
}

/** Where a partition starts, with the numbers, and why it is (mis)aligned. */
function alignText(p, e, sector) {
  const s = p.start_bytes;
  const where = `starts at ${fmtSize(s)} (sector ${Math.floor(s / sector)})`;
  if (p.aligned) return `${where}, a multiple of the ${fmtSize(e)} erase block`;
  const off = s % e;
  if (p.checked === false && off === 0) {
    return `${where}, a multiple of the ${fmtSize(e)} erase block; what is inside is not checked`;
  }
  const f = p.filesystem || {};
  if (off !== 0) return `${where}: ${fmtSize(off)} past a ${fmtSize(e)} boundary (aligned only to ${fmtSize(p.alignment_bytes || 1)})`;
  if (f.data_start_bytes !== undefined) return `${where}, but the FAT data area starts ${fmtSize(f.data_start_bytes % e)} past a ${fmtSize(e)} boundary`;
  return `${where}; a filesystem region inside is off the ${fmtSize(e)} grid`;
}

/** The plan's one-line verdict: aligned, aligned where checked, or not aligned. */
function planVerdict(p, e) {
  const unchecked = p.partitions.filter((q) => q.checked === false);
  const misaligned = p.partitions.some((q) => q.checked !== false && !q.aligned);
  if (misaligned) {
    return el('p', { id: 'plan-verdict', class: 'verdict bad' }, 'NOT aligned: see the rows marked misaligned');
  }
  if (unchecked.length) {
    const what = unchecked.map((q) => `${q.index} (${q.filesystem ? q.filesystem.kind : 'contents'})`).join(', ');
    return el('p', { id: 'plan-verdict', class: 'verdict warn' },
      `aligned where checked: verify cannot check inside partition ${what} (only the start), so the image is not called aligned`);
  }
  return el('p', { id: 'plan-verdict', class: 'verdict ok' },
    `aligned: every partition and filesystem region starts on a ${fmtSize(e)} boundary`);
}

function markOf(rows, index) {
  return (rows || []).find((m) => m.index === index) || { severity: null, past_end: false, notes: [], codes: [] };
}

/** The status word of a row: its worst finding first, then alignment. */
function statusOf(p, m, e) {
  if (m.severity === 'error') return ['error', 'error'];
  if (p.checked === false && p.start_bytes % e === 0) return ['not checked', 'unchecked'];
  if (!p.aligned) return ['misaligned', 'misaligned'];
  if (m.severity === 'warning') return ['warning', 'warning'];
  return ['aligned', 'aligned'];
}

function layoutTable(d, rows, extra) {
  const e = d.erase_block_bytes;
  const sector = d.sector_bytes;
  const body = d.partitions.map((p) => {
    const m = markOf(rows, p.index);
    const [word, cls] = statusOf(p, m, e);
    return el('tr', { 'data-index': p.index, class: `${m.severity ? `sev-${m.severity}` : ''}${p.logical ? ' logical' : ''}` },
      el('td', { class: 'num', 'data-label': 'partition' }, p.index, p.logical ? el('span', { class: 'small' }, ' logical') : null),
      el('td', { class: 'num', 'data-label': 'start' }, fmtSize(p.start_bytes), el('br'), el('span', { class: 'small' }, ` ${thousands(p.start_bytes)} B`)),
      el('td', { class: 'num', 'data-label': 'size' }, fmtSize(p.size_bytes)),
      el('td', { 'data-label': 'type' }, typeOf(p), p.bootable ? ' *' : ''),
      el('td', { 'data-label': 'filesystem' }, fsOf(p), extra ? extra(p) : null),
      el('td', { class: 'verdict-cell', 'data-label': 'status' },
        el('span', { class: `status ${cls}` }, word),
        el('br'), el('span', { class: 'small' }, alignText(p, e, sector)),
        m.notes.length ? el('ul', { class: 'row-notes' }, m.notes.map((n) => el('li', { 'data-code': n.code },
          el('span', { class: `sev ${n.severity}` }, n.severity), ' ', n.text))) : null));
  });
  return el('div', { class: 'scroll' }, el('table', { class: 'layout' },
    el('thead', {}, el('tr', {}, ['#', 'start', 'size', 'type', 'filesystem', 'status'].map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, body)));
}

async function copyText(button, text, label) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = 'Copied';
  } catch {
    button.textContent = 'Copy failed: select the text below';
  }
  window.__copied = text;
  setTimeout(() => { button.textContent = label; }, 1500);
}

// ---------------------------------------------------------------- Check
const checkOut = $('#check-out');
let lastFile = null;
let lastCheck = null;

/** Checks `blob` and draws the answer into `out`. Returns the report (or throws; an
 * `AbortError` when the check was cancelled or a newer one replaced it). */
async function checkInto(out, blob, name, opts) {
  const status = el('span', {}, `Checking ${name}…`);
  put(out, el('p', { role: 'status', class: 'checking' }, status));
  const t0 = performance.now();
  const head = new Uint8Array(await blob.slice(0, 16).arrayBuffer());
  let r;
  if (isContainer(head)) {
    // A stream read forward (gzip, a deflated zip entry…) can take long: progress and Cancel.
    const cancel = el('button', { type: 'button', class: 'check-cancel' }, 'Cancel');
    out.firstChild.append(' ', cancel);
    const job = verifyInWorker(blob, { ...opts, name }, (read, size) => {
      const pass = size > 0 ? Math.floor(read / size) + 1 : 1;
      const pct = size > 0 ? Math.min(100, Math.floor(((read % size) / size) * 100)) : 0;
      status.textContent = `Checking ${name}… ${fmtSize(read)} of the file read (pass ${pass}, ${pct}%)`;
      window.__checkProgress = (window.__checkProgress || 0) + 1;
    });
    cancel.addEventListener('click', () => job.cancel());
    r = await job.promise;
  } else {
    r = await verify(blob, { ...opts, name });
  }
  // The head read above counts too.
  r.stats.bytes_read += head.length;
  r.stats.reads += 1;
  const ms = performance.now() - t0;
  renderCheck(out, r, name, ms);
  return { r, ms };
}

/** The check worker running now: a new check stops it (its answer would be stale). */
let checkJob = null;

/** A container is checked in a worker (check-worker.js), where the decoders can read the
 * file synchronously; `promise` resolves to the same object `verify` resolves to, `cancel()`
 * stops the worker and rejects it with an `AbortError`. */
function verifyInWorker(blob, options, onProgress) {
  if (checkJob) checkJob.cancel();
  const job = {};
  job.promise = new Promise((resolve, reject) => {
    const w = new Worker('check-worker.js', { type: 'module' });
    const done = () => {
      w.terminate();
      if (checkJob === job) checkJob = null;
    };
    job.cancel = () => {
      done();
      const err = new Error('the check was cancelled');
      err.name = 'AbortError';
      reject(err);
    };
    w.onmessage = (ev) => {
      if (ev.data.type === 'progress') {
        if (onProgress) onProgress(ev.data.read, ev.data.size);
        return;
      }
      done();
      if (ev.data.type === 'done') {
        resolve(ev.data.r);
      } else {
        const err = new Error(ev.data.message);
        err.name = ev.data.name;
        if (ev.data.key) err.key = ev.data.key;
        reject(err);
      }
    };
    w.onerror = (ev) => {
      done();
      const err = new Error(`the check worker failed: ${ev.message || 'it could not start'}`);
      err.name = 'InternalError';
      reject(err);
    };
    w.postMessage({ blob, options });
  });
  checkJob = job;
  return job;
}

function renderCheck(out, r, name, ms) {
  const e = r.erase_block_bytes;
  const disk = r.findings.filter((f) => f.partition === null || f.partition === undefined);
  const findings = r.findings.map((f) => el('li', { 'data-code': f.code },
    el('span', { class: `sev ${f.severity}` }, f.severity), ' ',
    f.partition !== null && f.partition !== undefined ? `partition ${f.partition}: ` : '',
    el('code', {}, f.code), ' — ', f.message));
  const copyTextBtn = el('button', { type: 'button', class: 'copy-text' }, 'Copy as text');
  const copyJsonBtn = el('button', { type: 'button', class: 'copy-json' }, 'Copy as JSON');
  copyTextBtn.addEventListener('click', () => copyText(copyTextBtn, r.human, 'Copy as text'));
  copyJsonBtn.addEventListener('click', () => copyText(copyJsonBtn, `${r.json}\n`, 'Copy as JSON'));
  const drawn = r.partitions.length ? drawing(r, r.rows, { width: out.clientWidth || 600 }) : null;
  put(out,
    el('p', { class: `safe ${r.safe.answer}`, 'data-answer': r.safe.answer, role: 'status' }, r.safe.line),
    el('p', { class: 'summary' }, `${name}: ${fmtSize(r.size_bytes)} (${thousands(r.size_bytes)} bytes), ${r.input}${r.container ? `, in ${r.container}` : ''}; ${r.sector_bytes} B sectors, checked against a ${fmtSize(e)} erase block.`),
    disk.length ? el('ul', { class: 'findings disk-findings' }, disk.map((f) => el('li', { 'data-code': f.code },
      el('span', { class: `sev ${f.severity}` }, f.severity), ' ', f.message))) : null,
    r.partitions.length ? layoutTable(r, r.rows) : null,
    drawn,
    drawn ? legend(r, r.rows) : null,
    el('p', { class: 'verdict-cli small' }, r.verdict.replace(/^verdict: /, 'CLI verdict: ')),
    el('h3', {}, `Findings (${r.findings.length})`),
    r.findings.length ? el('ul', { class: 'findings all-findings' }, findings) : el('p', {}, 'None.'),
    el('p', { class: 'row' }, copyTextBtn, copyJsonBtn),
    el('p', { class: 'stats check-stats' }, `Read ${thousands(r.stats.bytes_read)} bytes (${fmtSize(r.stats.bytes_read)}) in ${r.stats.reads} slices of the file${r.containerInfo ? ` (${thousands(r.containerInfo.container_bytes)} bytes of ${r.container}${r.containerInfo.seekable ? ', read where verify asked' : `, decoded in ${r.containerInfo.passes} forward pass${r.containerInfo.passes === 1 ? '' : 'es'}`}${r.workerMemoryBytes ? `; the decoding worker held at most ${fmtSize(r.workerMemoryBytes)}` : ''})` : ''}, ${ms.toFixed(1)} ms.`),
    el('details', {}, el('summary', {}, 'As the CLI prints it'), el('pre', {}, r.human)),
  );
}

let checkGen = 0;

async function check(file) {
  lastFile = file;
  const gen = ++checkGen;
  if (checkJob) checkJob.cancel(); // its answer would be about another file or setting
  try {
    const { r, ms } = await checkInto(checkOut, file, file.name, { eraseBlock: Number($('#check-erase').value), strict: $('#check-strict').checked });
    if (gen !== checkGen) return; // a newer check owns the output
    lastCheck = { r, name: file.name, ms };
    window.__lastCheck = { ms, bytesRead: r.stats.bytes_read, reads: r.stats.reads, aligned: r.aligned, exitCode: r.exit_code, safe: r.safe.answer, container: r.container, containerBytes: r.containerInfo ? r.containerInfo.container_bytes : null, seekable: r.containerInfo ? r.containerInfo.seekable : null, passes: r.containerInfo ? r.containerInfo.passes || 0 : null, workerMemoryBytes: r.workerMemoryBytes, json: r.json };
  } catch (err) {
    if (gen !== checkGen) return;
    lastCheck = null;
    if (err.name === 'AbortError') {
      put(checkOut, el('p', { role: 'status', class: 'check-cancelled' }, `Check of ${file.name} cancelled: nothing was decided about it.`));
    } else {
      put(checkOut, errorBox(err));
    }
    window.__lastCheck = { error: err.name, message: err.message };
  }
}

$('#check-file').addEventListener('change', (ev) => {
  const file = ev.target.files[0];
  ev.target.value = ''; // so that choosing the same file again checks it again
  if (file) check(file);
});
for (const id of ['#check-erase', '#check-strict']) $(id).addEventListener('change', () => { if (lastFile) check(lastFile); });

function dropZone(zone, onDrop) {
  zone.addEventListener('dragover', (ev) => { ev.preventDefault(); zone.classList.add('over'); });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (ev) => { ev.preventDefault(); zone.classList.remove('over'); onDrop(ev.dataTransfer); });
}
dropZone($('#check-drop'), (dt) => { if (dt.files[0]) check(dt.files[0]); });

// ---------------------------------------------------------------- folders
/** A folder for a partition: `{ name, entries: [{ path, file, mtime, dir }] }` with paths
 * inside the folder; `name` is null for loose files. */
function folderFromInput(files) {
  const list = [...files];
  const rel = list.map((f) => f.webkitRelativePath || f.name);
  const tops = new Set(rel.map((p) => p.split('/')[0]));
  const one = tops.size === 1 && rel.every((p) => p.includes('/'));
  return {
    name: one ? [...tops][0] : null,
    entries: list.map((file, i) => ({ path: one ? rel[i].slice(rel[i].indexOf('/') + 1) : rel[i], file, mtime: file.lastModified, dir: false })),
  };
}

const metadataOf = (entry) => new Promise((ok) => {
  if (!entry.getMetadata) { ok(null); return; }
  entry.getMetadata((m) => ok(m && m.modificationTime ? m.modificationTime.getTime() : null), () => ok(null));
});

async function walk(entry, prefix, out) {
  if (entry.isFile) {
    const file = await new Promise((ok, bad) => entry.file(ok, bad));
    out.push({ path: prefix + entry.name, file, mtime: file.lastModified, dir: false });
  } else if (entry.isDirectory) {
    const path = prefix + entry.name;
    out.push({ path, file: null, mtime: await metadataOf(entry), dir: true });
    const reader = entry.createReader();
    for (;;) {
      const batch = await new Promise((ok, bad) => reader.readEntries(ok, bad));
      if (!batch.length) break;
      for (const child of batch) await walk(child, `${path}/`, out);
    }
  }
}

/** A folder from a drop: one dropped folder is the filesystem's root; several items (or
 * loose files) go into the root. */
async function folderFromDrop(dt) {
  const items = [...(dt.items || [])].filter((i) => i.kind === 'file');
  const entries = items.map((i) => (i.webkitGetAsEntry ? i.webkitGetAsEntry() : null));
  if (entries.length === 1 && entries[0] && entries[0].isDirectory) {
    const root = entries[0];
    const out = [{ path: '', file: null, mtime: await metadataOf(root), dir: true }];
    const reader = root.createReader();
    for (;;) {
      const batch = await new Promise((ok, bad) => reader.readEntries(ok, bad));
      if (!batch.length) break;
      for (const child of batch) await walk(child, '', out);
    }
    return { name: root.name, entries: out };
  }
  if (entries.length && entries.every(Boolean)) {
    const out = [];
    for (const e of entries) await walk(e, '', out);
    return { name: null, entries: out };
  }
  return { name: null, entries: [...dt.files].map((file) => ({ path: file.name, file, mtime: file.lastModified, dir: false })) };
}

function folderText(folder) {
  if (!folder) return 'empty (no folder)';
  const files = folder.entries.filter((e) => !e.dir);
  const bytes = files.reduce((n, e) => n + e.file.size, 0);
  return `${folder.name ? `${folder.name}/` : 'dropped files'}: ${files.length} file${files.length === 1 ? '' : 's'}, ${fmtSize(bytes)}`;
}

// ---------------------------------------------------------------- Plan
const FS = ['fat32', 'fat16', 'fat12', 'ext4', 'exfat', 'squashfs', 'erofs', 'swap', 'none'];
const hasFiles = (fs) => fs.startsWith('fat') || ['ext4', 'exfat', 'squashfs', 'erofs'].includes(fs);
/** Read-only filesystems: their size may be left out (the image's own), and they may carry
 * a dm-verity hash tree after them. */
const readOnly = (fs) => fs === 'squashfs' || fs === 'erofs';
let rowSerial = 0;

function partRow(fs = 'fat32', size = '256MiB', label = '') {
  rowSerial += 1;
  const id = `p${rowSerial}`;
  const row = el('div', { class: 'part', 'data-row': id });
  row.folder = null;
  const field = (labelText, control, errId) => el('div', { class: 'field' }, el('label', { for: control.id }, labelText), control, el('span', { class: 'field-error', id: errId }));
  const sel = el('select', { name: 'fs', id: `${id}-fs`, 'aria-describedby': `${id}-fs-err` }, FS.map((f) => el('option', { selected: f === fs }, f)));
  const sizeIn = el('input', { name: 'psize', id: `${id}-size`, value: size, spellcheck: 'false', 'aria-describedby': `${id}-size-err` });
  const labelIn = el('input', { name: 'label', id: `${id}-label`, value: label, spellcheck: 'false', 'aria-describedby': `${id}-label-err` });
  const dirIn = el('input', { type: 'file', name: 'folder', id: `${id}-dir`, webkitdirectory: true, multiple: true, 'aria-describedby': `${id}-dir-text ${id}-dir-err` });
  const dirText = el('span', { class: 'hint', id: `${id}-dir-text` }, folderText(null));
  const folder = el('div', { class: 'folder' }, el('label', { for: dirIn.id }, 'folder'), dirIn, dirText, el('span', { class: 'field-error', id: `${id}-dir-err` }));
  const verityIn = el('input', { type: 'checkbox', name: 'verity', id: `${id}-verity` });
  const verity = el('div', { class: 'field verity' }, verityIn, el('label', { for: verityIn.id }, 'dm-verity hash tree after it'));
  verityIn.addEventListener('change', () => updatePlan());
  const rm = el('button', { type: 'button', class: 'remove' }, 'Remove');
  const head = el('span', { class: 'pn' });
  rm.addEventListener('click', () => { row.remove(); renumber(); updatePlan(); });
  dirIn.addEventListener('change', () => { setFolder(row, folderFromInput(dirIn.files)); });
  sel.addEventListener('change', () => { folder.hidden = !hasFiles(sel.value); verity.hidden = !readOnly(sel.value); });
  folder.hidden = !hasFiles(fs);
  verity.hidden = !readOnly(fs);
  dropZone(row, async (dt) => { if (hasFiles(sel.value)) setFolder(row, await folderFromDrop(dt)); });
  row.append(head, field('filesystem', sel, `${id}-fs-err`), field('size (fill, auto)', sizeIn, `${id}-size-err`), field('label', labelIn, `${id}-label-err`), folder, verity, rm);
  row.renumber = (n) => {
    head.textContent = `#${n}`;
    rm.setAttribute('aria-label', `Remove partition ${n}`);
    sel.setAttribute('aria-label', `Partition ${n} filesystem`);
    dirIn.setAttribute('aria-label', `Partition ${n} folder`);
  };
  row.showFolder = () => { dirText.textContent = folderText(row.folder); };
  return row;
}
const rowsEl = () => [...$('#plan-parts').children];
function renumber() { rowsEl().forEach((r, i) => r.renumber(i + 1)); }

function setFolder(row, folder) {
  row.folder = folder && folder.entries.length ? folder : null;
  row.showFolder();
  updatePlan();
  renderBuildParts();
  window.__folders = rowsEl().map((r) => (r.folder ? { name: r.folder.name, count: r.folder.entries.filter((e) => !e.dir).length } : null));
}

$('#plan-parts').append(partRow('fat32', '256MiB', 'BOOT'), partRow('ext4', 'fill', 'rootfs'));
renumber();

$('#plan-add').addEventListener('click', () => {
  // Rust says where a new partition fits (before a `fill` row) and how big.
  try {
    const s = suggestPartition(formToml());
    const row = partRow(s.fs, s.size, '');
    const rows = rowsEl();
    if (s.position < rows.length) $('#plan-parts').insertBefore(row, rows[s.position]);
    else $('#plan-parts').append(row);
    renumber();
    updatePlan();
    row.querySelector('[name=psize]').focus();
  } catch (err) {
    showPlanError(err);
  }
});

const q = (s) => JSON.stringify(s);
/** The form as a TOML spec (the text `blockwise plan`/`build` read). */
export function formToml() {
  const f = $('#plan-form');
  const v = (name) => f.elements[name].value.trim();
  const lines = ['[image]'];
  if (v('size')) lines.push(`size = ${q(v('size'))}`);
  lines.push(`erase-block = ${q(v('erase-block'))}`, `sector-size = ${v('sector-size')}`, `table = ${q(v('table'))}`);
  if (v('timestamp')) lines.push(`timestamp = ${/^\d+$/.test(v('timestamp')) ? v('timestamp') : q(v('timestamp'))}`);
  for (const row of rowsEl()) {
    const fs = row.querySelector('[name=fs]').value;
    const size = row.querySelector('[name=psize]').value.trim();
    const label = row.querySelector('[name=label]').value.trim();
    lines.push('', '[[partition]]', `fs = ${q(fs)}`);
    // A read-only filesystem without a size is the image's own size.
    if (size || !readOnly(fs)) lines.push(`size = ${q(size)}`);
    if (label && fs !== 'none') lines.push(`label = ${q(label)}`);
    if (readOnly(fs) && row.querySelector('[name=verity]').checked) lines.push('verity = "appended"');
    if (row.folder && hasFiles(fs)) {
      if (row.folder.name) lines.push(`contents = ${q(row.folder.name)}`);
      else lines.push(`# contents: ${row.folder.entries.length} files dropped in the page (put them in a folder and name it here)`);
    }
  }
  return `${lines.join('\n')}\n`;
}

/** The form control a spec key names (`partition[2].size` → row 2's size). */
function fieldOf(key) {
  const image = { 'image.size': 'plan-size', 'image.erase-block': 'plan-erase', 'image.sector-size': 'plan-sector', 'image.table': 'plan-table', 'image.timestamp': 'plan-timestamp' }[key];
  if (image) return $(`#${image}`);
  const m = /^partition\[(\d+)\](?:\.([a-z-]+))?/.exec(key || '');
  if (!m) return null;
  const row = rowsEl()[Number(m[1]) - 1];
  if (!row) return null;
  // Keys without a field of their own (ext4.stride, fat.cluster, type, …) mark the
  // filesystem they belong to.
  const name = { size: 'psize', start: 'psize', label: 'label', contents: 'folder' }[m[2]] || 'fs';
  return row.querySelector(`[name=${name}]`);
}

function clearPlanErrors() {
  for (const c of document.querySelectorAll('#plan-form [aria-invalid]')) c.removeAttribute('aria-invalid');
  for (const s of document.querySelectorAll('#plan-form .field-error')) s.textContent = '';
}

/** Marks the field a SpecError names (`aria-invalid`, the message beside it). */
function showPlanError(err) {
  clearPlanErrors();
  const field = err && err.key ? fieldOf(err.key) : null;
  const message = err && err.message ? err.message : String(err);
  if (field) {
    field.setAttribute('aria-invalid', 'true');
    const errId = (field.getAttribute('aria-describedby') || '').split(' ').find((i) => i.endsWith('-err'));
    const slot = errId ? document.getElementById(errId) : null;
    if (slot) slot.textContent = message.startsWith(`${err.key}: `) ? message.slice(err.key.length + 2) : message;
  } else {
    $('#plan-parts-err').textContent = message;
  }
  return field;
}

function planView(p) {
  const e = p.erase_block_bytes;
  const notes = [];
  for (const part of p.partitions) {
    const f = part.filesystem;
    if (!f || (!f.notes && f.fat_start_bytes === undefined && f.block_bytes === undefined)) continue;
    let head;
    if (f.fat_start_bytes !== undefined) {
      head = `Partition ${part.index}, ${f.kind}: ${thousands(f.cluster_count)} clusters of ${fmtSize(f.cluster_bytes)}, ${f.reserved_sectors} reserved sectors, ${f.fat_count} FATs of ${f.fat_sectors} sectors; FAT at ${fmtSize(f.fat_start_bytes)}, data at ${fmtSize(f.data_start_bytes)} from the start of the disk.`;
    } else {
      const raid = f.stride !== undefined ? `, stride ${f.stride}, stripe width ${f.stripe_width}` : '';
      const blocks = f.blocks !== undefined ? `${thousands(f.blocks)} blocks of ${f.block_bytes} B` : `${f.block_bytes} B blocks`;
      const inodes = f.inodes != null ? `, ${thousands(f.inodes)} inodes` : '';
      head = `Partition ${part.index}, ${f.kind}: ${blocks}${inodes}${raid}${f.journal_start_bytes != null ? `, journal at ${fmtSize(f.journal_start_bytes)}` : ''}${f.verity ? `; dm-verity hash tree at ${fmtSize(f.verity.hash_start_bytes)}` : ''}.`;
    }
    notes.push(el('p', {}, head), f.notes ? el('ul', { class: 'notes' }, f.notes.map((n) => el('li', {}, n))) : null);
  }
  const table = p.table.kind === 'none' ? 'no partition table' : `${p.table.kind.toUpperCase()} table`;
  // Partitions are planned in spec order, so the n-th planned partition is the n-th row.
  const folders = rowsEl();
  const onDrop = async (part, dt) => {
    const row = folders[p.partitions.indexOf(part)];
    if (row) setFolder(row, await folderFromDrop(dt));
  };
  const extra = (part) => {
    const row = folders[p.partitions.indexOf(part)];
    return row && hasFiles(row.querySelector('[name=fs]').value) ? el('div', { class: 'small' }, `folder: ${folderText(row.folder)}`) : null;
  };
  return [
    planVerdict(p, e),
    el('p', {}, `Disk: ${fmtSize(p.size_bytes)} (${thousands(p.size_bytes)} bytes), ${table}, ${p.sector_bytes} B sectors, erase block ${fmtSize(e)}.`),
    p.extended ? el('p', { class: 'small', id: 'plan-extended' }, `More than four partitions in an MBR: partition 4 is an extended partition (${fmtSize(p.extended.start_bytes)} + ${fmtSize(p.extended.size_bytes)}) holding the logical partitions ${p.partitions.filter((x) => x.logical).map((x) => x.index).join(', ')}, each after one erase block for its EBR.`) : null,
    p.gpt ? el('p', { class: 'small' }, `GPT: usable LBAs ${p.gpt.first_usable_lba}..${p.gpt.last_usable_lba}; backup header at LBA ${p.gpt.backup_header_lba}.`) : null,
    layoutTable(p, p.rows, extra),
    drawing(p, p.rows, { width: $('#plan-out').clientWidth || 600, onDrop }),
    legend(p, p.rows),
    el('p', { class: 'hint' }, 'Drop a folder on a partition in the drawing (or on its row above) to fill it.'),
    ...notes,
  ];
}

let lastPlan = null;
let planTimer = 0;
function updatePlan() {
  clearTimeout(planTimer);
  planTimer = setTimeout(planNow, 60);
}
function planNow() {
  if (!window.__ready) return;
  const toml = formToml();
  $('#plan-toml').textContent = toml;
  sizeHint();
  timestampHint();
  try {
    const p = plan(toml);
    clearPlanErrors();
    lastPlan = { plan: p, toml };
    window.__lastPlan = p;
    put($('#plan-out'), ...planView(p));
    $('#plan-build').disabled = false;
    $('#plan-build-hint').textContent = '';
  } catch (err) {
    lastPlan = null;
    window.__lastPlan = { error: err.name, message: err.message, key: err.key };
    const field = showPlanError(err);
    put($('#plan-out'), errorBox(err));
    $('#plan-build').disabled = true;
    $('#plan-build-hint').textContent = field ? 'Fix the marked field first.' : 'Fix the plan first.';
  }
  renderBuildParts();
}

function sizeHint() {
  const text = $('#plan-size').value.trim();
  const hint = $('#plan-size-hint');
  if (!text) { hint.textContent = 'empty: the partitions decide'; return; }
  try {
    const s = sizeInfo(text, 'image.size');
    hint.textContent = `${thousands(s.bytes)} bytes = ${s.binary} = ${s.decimal}`;
  } catch {
    hint.textContent = '';
  }
}
function timestampHint() {
  const t = $('#plan-timestamp').value.trim();
  $('#plan-timestamp-hint').textContent = /^\d+$/.test(t) && Number(t) < 2 ** 40 ? new Date(Number(t) * 1000).toISOString().replace('.000Z', ' UTC').replace('T', ' ') : (t ? '' : 'empty: the files\u2019 own times');
}

$('#plan-form').addEventListener('input', updatePlan);
$('#plan-form').addEventListener('change', updatePlan);
$('#plan-form').addEventListener('submit', (ev) => ev.preventDefault());
$('#plan-copy').addEventListener('click', () => copyText($('#plan-copy'), $('#plan-toml').textContent, 'Copy'));
$('#plan-build').addEventListener('click', () => { selectTab('build'); startBuild(); });

// Drawings are made for the width at hand: redraw when it changes (a phone turned).
let resizeTimer = 0;
let lastWidth = window.innerWidth;
window.addEventListener('resize', () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    if (window.innerWidth === lastWidth) return;
    lastWidth = window.innerWidth;
    if (lastCheck) renderCheck(checkOut, lastCheck.r, lastCheck.name, lastCheck.ms);
    if (lastBuildCheck) renderCheck($('#build-check-out'), lastBuildCheck.r, lastBuildCheck.name, lastBuildCheck.ms);
    updatePlan();
  }, 100);
});

// ---------------------------------------------------------------- Build
let worker = null;
let lastBuildCheck = null;
let urls = [];

/** The Build tab's list: every partition of the plan with its folder (a drop zone and a
 * picker each, the same folders as the Plan tab's rows). */
function renderBuildParts() {
  const box = $('#build-parts');
  if (!lastPlan) {
    put(box, el('p', { class: 'error-box' }, 'The plan has an error: fix it in the Plan tab first.'));
    $('#build-go').disabled = true;
    return;
  }
  $('#build-go').disabled = Boolean(worker);
  const p = lastPlan.plan;
  const rows = rowsEl();
  const items = p.partitions.map((part, i) => {
    const row = rows[i];
    const fs = row ? row.querySelector('[name=fs]').value : part.content;
    const label = row ? row.querySelector('[name=label]').value.trim() : '';
    const li = el('li', { class: 'part', 'data-index': part.index },
      el('span', { class: 'pn' }, `#${part.index}${part.logical ? ' (logical)' : ''}`), ` ${fs}${label ? ` "${label}"` : ''}, ${fmtSize(part.size_bytes)} — `);
    if (row && hasFiles(fs)) {
      const id = `build-dir-${i + 1}`;
      const input = el('input', { type: 'file', id, webkitdirectory: true, multiple: true, 'aria-label': `Partition ${part.index} folder` });
      input.addEventListener('change', () => setFolder(row, folderFromInput(input.files)));
      li.append(el('span', { class: 'folder-text' }, folderText(row.folder)), ' ', el('label', { for: id, class: 'small' }, 'choose a folder:'), ' ', input);
      dropZone(li, async (dt) => setFolder(row, await folderFromDrop(dt)));
    } else {
      li.append(el('span', { class: 'small' }, fs === 'none' ? 'left empty' : 'written by the spec'));
    }
    return li;
  });
  put(box, el('p', {}, `${fmtSize(p.size_bytes)} ${p.table.kind === 'none' ? 'bare filesystem' : `${p.table.kind.toUpperCase()} image`}, erase block ${fmtSize(p.erase_block_bytes)}:`), el('ul', { class: 'build-list' }, items));
}

function setProgress(phase, done, total) {
  $('#build-progress-box').hidden = false;
  $('#build-phase').textContent = phase;
  const bar = $('#build-progress');
  if (total > 0) { bar.max = total; bar.value = done; } else { bar.removeAttribute('value'); }
}

function buildInputs() {
  const entries = [];
  const files = [];
  rowsEl().forEach((row, i) => {
    const fs = row.querySelector('[name=fs]').value;
    if (!row.folder || !hasFiles(fs)) return;
    for (const e of row.folder.entries) {
      entries.push({ path: e.path, size: e.dir ? 0 : e.file.size, mtime: e.mtime ?? undefined, partition: i + 1, dir: e.dir });
      files.push(e.dir ? null : e.file);
    }
  });
  return { entries, files };
}

function imageName() {
  return 'sd.img';
}

let lastBuildInputs = null;

/** The seekable .img.zst of the last build, when asked for: the same build again in a worker,
 * then the CLI's encoder (libzstd compiled to wasm) over the image. */
function makeZst(button, name) {
  const inputs = lastBuildInputs;
  if (!inputs) return;
  const file = `${name}.zst`;
  button.disabled = true;
  button.textContent = `Compressing ${file}…`;
  const w = new Worker('build-worker.js', { type: 'module' });
  w.onmessage = (ev) => {
    const m = ev.data;
    if (m.type === 'progress') {
      button.textContent = `Compressing ${file}: ${fmtSize(m.done)} of ${fmtSize(m.total)}`;
    } else if (m.type === 'zst') {
      w.terminate();
      const url = URL.createObjectURL(m.blob);
      urls.push(url);
      const a = el('a', { href: url, download: file, id: 'build-download-zst' }, `Download ${file} (seekable zstd, ${fmtSize(m.blob.size)})`);
      button.replaceWith(a);
      a.focus();
    } else if (m.type === 'error') {
      w.terminate();
      button.replaceWith(errorBox(Object.assign(new Error(m.message), { name: m.name })));
    }
  };
  w.onerror = (ev) => {
    w.terminate();
    button.replaceWith(errorBox(new Error(`the build worker failed: ${ev.message || 'it could not start'}`)));
  };
  w.postMessage({ ...inputs, zst: true });
}

function startBuild() {
  if (worker) return;
  planNow();
  if (!lastPlan) { renderBuildParts(); return; }
  for (const u of urls) URL.revokeObjectURL(u);
  urls = [];
  lastBuildCheck = null;
  const toml = lastPlan.toml;
  const { entries, files } = buildInputs();
  lastBuildInputs = { toml, entries, files };
  const name = imageName();
  const t0 = performance.now();
  put($('#build-out'));
  put($('#build-check'));
  window.__lastBuild = undefined;
  worker = new Worker('build-worker.js', { type: 'module' });
  $('#build-go').disabled = true;
  $('#plan-build').disabled = true;
  $('#build-cancel').hidden = false;
  // A keyboard user who started the build from the Plan tab lands on Cancel, not on nothing.
  if (!$('#build').contains(document.activeElement)) $('#build-cancel').focus();
  setProgress('Starting…', 0, 0);
  const timeline = [];
  let seed = null;
  worker.onmessage = async (ev) => {
    const m = ev.data;
    timeline.push([m.type, Math.round(performance.now() - t0)]);
    if (m.type === 'phase') setProgress(`${m.phase[0].toUpperCase()}${m.phase.slice(1)}…`, 0, 0);
    else if (m.type === 'planned') {
      seed = m.plan && typeof m.plan.seed === 'string' ? m.plan.seed : null;
      put($('#build-out'), el('p', { class: 'small' }, `Planned ${fmtSize(m.size)}: ${fmtSize(m.metadataBytes)} of metadata made, ${fmtSize(m.contentBytes)} of files to read.`));
    } else if (m.type === 'progress') {
      setProgress(`Reading the files for the .bmap: ${fmtSize(m.done)} of ${fmtSize(m.total)}`, m.done, m.total);
    } else if (m.type === 'done') {
      finishWorker();
      await built(m, name, withSeed(toml, seed), entries.filter((e) => !e.dir).length, t0, timeline);
    } else if (m.type === 'error') {
      finishWorker();
      const err = Object.assign(new Error(m.message), { name: m.name, key: m.key });
      put($('#build-out'), errorBox(err));
      window.__lastBuild = { error: m.name, message: m.message };
    }
  };
  worker.onerror = (ev) => {
    finishWorker();
    put($('#build-out'), errorBox(new Error(`the build worker failed: ${ev.message || 'it could not start (module workers need a current browser)'}`)));
    window.__lastBuild = { error: 'WorkerError', message: ev.message };
  };
  worker.postMessage({ toml, entries, files });
}

function finishWorker() {
  if (worker) worker.terminate();
  worker = null;
  $('#build-cancel').hidden = true;
  $('#build-progress-box').hidden = true;
  $('#build-go').disabled = !lastPlan;
  $('#plan-build').disabled = !lastPlan;
}

$('#build-go').addEventListener('click', startBuild);
$('#build-cancel').addEventListener('click', () => {
  if (!worker) return;
  finishWorker();
  put($('#build-out'), el('p', { class: 'verdict warn', id: 'build-cancelled' }, 'Cancelled: nothing was saved.'));
  window.__lastBuild = { cancelled: true };
});

/** `toml` with the seed the build used in its [image] table (unless it names one): the IDs
 * derive from it, and the page's trees (no owners, millisecond times) would make the CLI
 * derive another from the same folders. With it, `blockwise build` gives the same bytes. */
function withSeed(toml, seed) {
  if (!seed || /^seed\s*=/m.test(toml)) return toml;
  return toml.replace(/^\[image\]\n/m, `[image]\nseed = "${seed}"\n`);
}

async function built(m, name, toml, fileCount, t0, timeline) {
  const image = m.image;
  const link = (blob, file, id, text) => {
    const url = URL.createObjectURL(blob);
    urls.push(url);
    return el('a', { href: url, download: file, id }, text);
  };
  const imgLink = link(image, name, 'build-download', `Download ${name} (${fmtSize(image.size)})`);
  imgLink.className = 'button primary';
  const fileOf = (o) => (o.replace && name.endsWith(o.replace) ? name.slice(0, -o.replace.length) : name) + o.suffix;
  const extras = m.extra.map((o) => link(o.blob, fileOf(o), `build-download${o.suffix.replace(/\./g, '-')}`, `Download ${fileOf(o)} (${o.kind}, ${fmtSize(o.blob.size)})`));
  const roots = m.extra.filter((o) => o.text).map((o) => el('li', {}, `${o.kind}: `, el('code', { class: 'roothash' }, o.text)));
  const zst = el('button', { type: 'button', id: 'build-make-zst' }, `Make ${name}.zst (seekable zstd)`);
  zst.addEventListener('click', () => makeZst(zst, name));
  const save = window.showSaveFilePicker ? el('button', { type: 'button', id: 'build-save' }, 'Save to a file…') : null;
  if (save) save.addEventListener('click', () => saveToFile(image, name, save));
  put($('#build-out'),
    el('p', { id: 'build-verdict', class: 'verdict ok' }, `Built ${fmtSize(image.size)} in ${((performance.now() - t0) / 1000).toFixed(1)} s from ${fileCount} files.`),
    el('p', { class: 'downloads' }, imgLink, ...extras, zst, save),
    roots.length ? el('ul', { id: 'build-roothashes' }, roots) : null,
    el('p', { class: 'hint' }, 'Write it with blockwise write sd.img /dev/sdX (or bmaptool copy): the .bmap lets them skip the empty parts and check what they wrote. sd.simg is the same image as an Android sparse file (fastboot flash, simg2img); blockwise write takes it too. The .img.zst (seekable zstd, a frame per erase block) is made when asked: it is a compressed copy held in memory until saved.'),
    ...(m.notes || []).map((n) => el('p', { class: 'hint build-note' }, n)),
    el('details', {}, el('summary', {}, 'Spec used (blockwise build of it gives the same bytes)'), el('pre', { id: 'build-toml' }, toml)),
  );
  window.__lastBuild = { size: image.size, ms: m.ms, timeline };
  if (!document.activeElement || document.activeElement === document.body) imgLink.focus();
  // Check the result like any image: the page reads it back through the same verifier.
  const out = el('div', { id: 'build-check-out' });
  put($('#build-check'), el('h3', {}, `Check of ${name}`), out);
  try {
    const eb = lastPlan ? lastPlan.plan.erase_block_bytes : undefined;
    const { r, ms } = await checkInto(out, image, name, { eraseBlock: eb });
    lastBuildCheck = { r, name, ms };
    window.__lastBuild.check = { safe: r.safe.answer, exitCode: r.exit_code, bytesRead: r.stats.bytes_read };
  } catch (err) {
    put(out, errorBox(err));
    window.__lastBuild.check = { error: err.name, message: err.message };
  }
}

/** The File System Access API (where the browser has it): the image streams from its parts
 * into the chosen file. */
async function saveToFile(image, name, button) {
  try {
    const handle = await window.showSaveFilePicker({ suggestedName: name });
    const writable = await handle.createWritable();
    let done = 0;
    const count = new TransformStream({
      transform(chunk, ctl) {
        done += chunk.byteLength;
        button.textContent = `Saving… ${fmtSize(done)} of ${fmtSize(image.size)}`;
        ctl.enqueue(chunk);
      },
    });
    await image.stream().pipeThrough(count).pipeTo(writable);
    button.textContent = `Saved ${fmtSize(done)}`;
    window.__saved = done;
  } catch (err) {
    if (err && err.name === 'AbortError') { button.textContent = 'Save to a file…'; return; }
    button.textContent = `Save failed: ${err.message}`;
  }
}

// ---------------------------------------------------------------- start
function fillEraseBlocks() {
  const choices = eraseBlockChoices();
  const check = $('#check-erase');
  const planSel = $('#plan-erase');
  put(check, choices.map((c) => el('option', { value: c.bytes, selected: c.bytes === 4194304 }, c.label)));
  put(planSel, choices.map((c) => el('option', { value: c.label.replace(' ', ''), selected: c.bytes === 4194304 }, c.label)));
}

async function start() {
  if ('serviceWorker' in navigator) {
    // Offline after the first visit; a failure here only costs that.
    navigator.serviceWorker.register('sw.js').catch(() => {});
  }
  const t0 = performance.now();
  let timer;
  const timeout = new Promise((_, bad) => { timer = setTimeout(() => bad(new Error('no answer within 5 seconds')), 5000); });
  try {
    await Promise.race([init(), timeout]);
  } catch (err) {
    window.__bootFail(`The WebAssembly module could not be loaded (${err && err.message ? err.message : err}). Reload to try again; the page needs a browser with WebAssembly and a server that serves pkg/blockwise_wasm_bg.wasm.`);
    return;
  } finally {
    clearTimeout(timer);
  }
  $('#plan-timestamp').value = String(Math.floor(Date.now() / 1000));
  fillEraseBlocks();
  window.__ready = { initMs: performance.now() - t0 };
  for (const s of document.querySelectorAll('main section')) s.inert = false;
  $('#boot-status').hidden = true;
  $('#version').textContent = `blockwise ${version()} — the same Rust core as the command line, as WebAssembly.`;
  planNow();
}
start();
