// The page: Check, Plan and Build over the blockwise wasm module. No framework; every number
// and verdict comes from the Rust core (verify/plan/build), this file only draws it.
import init, { plan, verify, build, version, maxBuildBytes } from './pkg/blockwise_wasm.js';

const $ = (sel, root = document) => root.querySelector(sel);

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

/** 4 MiB, 31.5 KiB, 123 B: exact units when they divide, else one decimal. */
export function fmtSize(b) {
  const units = [['TiB', 2 ** 40], ['GiB', 2 ** 30], ['MiB', 2 ** 20], ['KiB', 2 ** 10]];
  for (const [name, unit] of units) {
    if (b >= unit) {
      const v = b / unit;
      return `${Number.isInteger(v) ? v : v.toFixed(v < 10 ? 2 : 1)} ${name}`;
    }
  }
  return `${b} B`;
}

/** replaceChildren without the nulls of optional parts (which it would print as "null"). */
function put(target, ...children) {
  target.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
}

function errorBox(e) {
  const name = e && e.name ? e.name : 'Error';
  return el('p', { class: 'error-box', role: 'alert' }, el('strong', {}, `${name}: `), e && e.message ? e.message : String(e));
}

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

// ---------------------------------------------------------------- layout table + drawing
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
  if (f.fat_start_bytes !== undefined) return `${f.kind}${f.label ? ` "${f.label}"` : ''}, ${fmtSize(f.cluster_bytes)} clusters`;
  if (f.block_bytes !== undefined) return `${f.kind}${f.label ? ` "${f.label}"` : ''}, ${f.block_bytes} B blocks, stride ${f.stride}`;
  return `${f.kind}${f.aligned === null ? ' (not checked)' : ''}`;
}

/** Regions inside a partition worth drawing: [name, offset from the start of the disk (as
 * the plan and the report give them), must be erase-aligned]. */
function regions(p) {
  const f = p.filesystem || {};
  const out = [['start', p.start_bytes, true]];
  if (f.fat_start_bytes !== undefined) {
    out.push(['FAT', f.fat_start_bytes, false]);
    out.push(['data', f.data_start_bytes, true]);
  }
  if (f.inode_table_start_bytes !== undefined && f.inode_table_start_bytes !== null) {
    out.push(['inodes', f.inode_table_start_bytes, false]);
  }
  if (f.journal_start_bytes !== undefined && f.journal_start_bytes !== null) {
    out.push(['journal', f.journal_start_bytes, true]);
  }
  return out;
}

/** Why a partition is (mis)aligned, with the numbers. */
function alignText(p, e, sector) {
  const s = p.start_bytes;
  const where = `starts at ${fmtSize(s)} (sector ${Math.floor(s / sector)})`;
  if (p.aligned) return `${where}, a multiple of the ${fmtSize(e)} erase block`;
  const off = s % e;
  if (p.checked === false && off === 0) {
    return `${where}, a multiple of the ${fmtSize(e)} erase block; what is inside is not checked`;
  }
  const f = p.filesystem || {};
  if (off !== 0) {
    return `${where}: ${fmtSize(off)} past a ${fmtSize(e)} boundary (aligned only to ${fmtSize(p.alignment_bytes || 1)})`;
  }
  if (f.data_start_bytes !== undefined) {
    return `${where}, but the FAT data area starts ${fmtSize(f.data_start_bytes % e)} past a ${fmtSize(e)} boundary`;
  }
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

function layoutTable(r, e) {
  const sector = r.sector_bytes;
  const rows = r.partitions.map((p) => el('tr', { 'data-index': p.index },
    el('td', { class: 'num' }, p.index),
    el('td', { class: 'num' }, fmtSize(p.start_bytes), el('br'), el('span', { class: 'small' }, `${p.start_bytes} B`)),
    el('td', { class: 'num' }, fmtSize(p.size_bytes)),
    el('td', {}, typeOf(p), p.bootable ? ' *' : ''),
    el('td', {}, fsOf(p)),
    el('td', { class: 'verdict-cell' },
      p.checked === false && p.start_bytes % e === 0
        ? el('span', { class: 'unchecked' }, 'not checked')
        : el('span', { class: p.aligned ? 'aligned' : 'misaligned' }, p.aligned ? 'aligned' : 'misaligned'),
      el('br'), el('span', { class: 'small' }, alignText(p, e, sector)))));
  return el('div', { class: 'scroll' }, el('table', { class: 'layout' },
    el('thead', {}, el('tr', {}, ['#', 'start', 'size', 'type', 'filesystem', 'alignment'].map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, rows)));
}

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs = {}, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

/** The whole disk to scale, then one strip per partition: three erase blocks around its
 * start with the filesystem regions as marks; a mark off the grid is drawn red. */
function drawing(r, e, container) {
  const avail = container && container.clientWidth ? container.clientWidth : 600;
  const W = Math.max(300, Math.min(avail, 800)), barH = 26, stripH = 46, top = 18;
  const parts = r.partitions;
  const H = top + barH + 14 + parts.length * (stripH + 8) + 4;
  const s = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'Layout drawing: partitions on the erase-block grid' });
  s.append(svg('title', {}, 'Partitions and filesystem regions on the erase-block grid'));
  const size = Math.max(r.size_bytes, 1);
  s.append(svg('text', { x: 0, y: 12, 'font-size': 11, fill: '#5f6368' }, `whole disk, ${fmtSize(r.size_bytes)}`));
  s.append(svg('rect', { x: 0, y: top, width: W, height: barH, fill: '#eceff3', stroke: '#c4c9d0' }));
  const colors = ['#5b8def', '#36a66b', '#e0a030', '#a06cd5', '#d3556c', '#2aa3b8'];
  parts.forEach((p, i) => {
    const x = (p.start_bytes / size) * W;
    const w = Math.max((p.size_bytes / size) * W, 2);
    s.append(svg('rect', { x, y: top, width: w, height: barH, fill: colors[i % colors.length], stroke: p.aligned ? '#fff' : '#b3261e', 'stroke-width': p.aligned ? 1 : 3 }));
    if (w > 24) s.append(svg('text', { x: x + 4, y: top + 17, 'font-size': 12, fill: '#fff' }, String(p.index)));
  });
  parts.forEach((p, i) => {
    const y = top + barH + 14 + i * (stripH + 8);
    const first = Math.floor(p.start_bytes / e) * e;
    // Wide enough for the regions near the start (up to 8 erase blocks); the rest are listed.
    const near = regions(p).map(([, off]) => off).filter((off) => off - first < 8 * e);
    const blocks = Math.max(3, Math.ceil((Math.max(...near) - first) / e) + 1);
    const span = blocks * e;
    const X = (off) => 40 + ((off - first) / span) * (W - 44);
    s.append(svg('text', { x: 0, y: y + 18, 'font-size': 12, fill: '#1d1d1f' }, `#${p.index}`));
    // The partition's body in the window.
    const px = X(Math.max(p.start_bytes, first));
    const pe = X(Math.min(p.start_bytes + p.size_bytes, first + span));
    s.append(svg('rect', { x: 40, y, width: W - 44, height: 24, fill: '#f5f7fa', stroke: '#c4c9d0' }));
    if (pe > px) s.append(svg('rect', { x: px, y, width: pe - px, height: 24, fill: colors[i % colors.length], opacity: 0.35 }));
    for (let k = 0; k <= blocks; k++) {
      s.append(svg('line', { x1: X(first + k * e), x2: X(first + k * e), y1: y - 2, y2: y + 26, stroke: '#5f6368', 'stroke-dasharray': '3 2' }));
    }
    const far = regions(p).filter(([, off]) => off > first + span)
      .map(([name, off]) => `${name} at +${fmtSize(off - p.start_bytes)}${off % e === 0 ? ' (on the grid)' : ' (off the grid)'}`);
    s.append(svg('text', { x: 40, y: y + 40, 'font-size': 10, fill: '#5f6368' }, `grid: ${fmtSize(e)} erase blocks from ${fmtSize(first)}${far.length ? `; ${far.join(', ')}` : ''}`));
    let labelX = -1e9;
    for (const [name, off, strict] of regions(p)) {
      if (off < first || off > first + span) continue;
      const onGrid = off % e === 0;
      const colour = onGrid ? '#1b7f3b' : (strict ? '#b3261e' : '#8a5a00');
      const x = X(off);
      s.append(svg('line', { x1: x, x2: x, y1: y, y2: y + 24, stroke: colour, 'stroke-width': 3 }));
      const w = name.length * 6.5;
      let lx = Math.max(x + 3, labelX + 4);
      if (lx + w > W) lx = x - w - 3;
      const t = svg('text', { x: lx, y: y + 15, 'font-size': 11, fill: colour, 'font-weight': 600 }, name);
      s.append(t);
      labelX = lx + w;
    }
  });
  return s;
}

// ---------------------------------------------------------------- Check
const checkOut = $('#check-out');
let lastFile = null;

async function check(file) {
  lastFile = file;
  put(checkOut, el('p', { role: 'status' }, `Checking ${file.name}…`));
  const t0 = performance.now();
  let r;
  try {
    r = await verify(file, { eraseBlock: $('#check-erase').value, strict: $('#check-strict').checked, name: file.name });
  } catch (err) {
    lastCheck = null;
    put(checkOut, errorBox(err));
    window.__lastCheck = { error: err.name, message: err.message };
    return;
  }
  const ms = performance.now() - t0;
  lastCheck = { r, file, ms };
  renderCheck(r, file, ms);
  window.__lastCheck = { ms, bytesRead: r.stats.bytes_read, reads: r.stats.reads, aligned: r.aligned, exitCode: r.exit_code };
}

let lastCheck = null;
function renderCheck(r, file, ms) {
  const e = r.erase_block_bytes;
  const cls = r.exit_code !== 0 ? 'bad' : (r.aligned ? 'ok' : 'warn');
  const findings = r.findings.map((f) => el('li', { 'data-code': f.code },
    el('span', { class: `sev ${f.severity}` }, f.severity), ' ', el('code', {}, f.code), ' — ', f.message));
  const table = r.table.kind === 'none' ? 'no partition table (bare filesystem)' : `${r.table.kind.toUpperCase()} partition table`;
  put(checkOut, 
    el('p', { id: 'check-verdict', class: `verdict ${cls}` }, r.verdict.replace(/^verdict: /, '')),
    el('p', {}, `${file.name}: ${fmtSize(r.size_bytes)} (${r.size_bytes} bytes), ${table}, ${r.sector_bytes} B sectors, checked against a ${fmtSize(r.erase_block_bytes)} erase block.`),
    r.partitions.length ? layoutTable(r, e) : null,
    r.partitions.length ? drawing(r, r.erase_block_bytes, checkOut) : null,
    el('h3', {}, `Findings (${r.findings.length})`),
    r.findings.length ? el('ul', { class: 'findings' }, findings) : el('p', {}, 'None.'),
    el('p', { id: 'check-stats', class: 'stats' }, `Read ${r.stats.bytes_read} bytes (${fmtSize(r.stats.bytes_read)}) in ${r.stats.reads} slices of the file, ${ms.toFixed(1)} ms.`),
    el('details', {}, el('summary', {}, 'As the CLI prints it'), el('pre', {}, r.human)),
  );
}

// Drawings are made for the width at hand: redraw when it changes (a phone turned).
let resizeTimer = 0;
let lastWidth = window.innerWidth;
window.addEventListener('resize', () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    if (window.innerWidth === lastWidth) return;
    lastWidth = window.innerWidth;
    if (lastCheck) renderCheck(lastCheck.r, lastCheck.file, lastCheck.ms);
    updatePlan();
  }, 100);
});

$('#check-file').addEventListener('change', (ev) => {
  const file = ev.target.files[0];
  // Cleared, so that choosing the same file again checks it again.
  ev.target.value = '';
  if (file) check(file);
});
for (const id of ['#check-erase', '#check-strict']) $(id).addEventListener('change', () => { if (lastFile) check(lastFile); });

function dropZone(zone, onDrop) {
  zone.addEventListener('dragover', (ev) => { ev.preventDefault(); zone.classList.add('over'); });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (ev) => { ev.preventDefault(); zone.classList.remove('over'); onDrop(ev.dataTransfer); });
}
dropZone($('#check-drop'), (dt) => { if (dt.files[0]) check(dt.files[0]); });

// ---------------------------------------------------------------- Plan
const FS = ['fat32', 'fat16', 'fat12', 'ext4', 'none'];
function partRow(fs = 'fat32', size = '256MiB', label = '') {
  const row = el('div', { class: 'part' });
  const n = () => [...$('#plan-parts').children].indexOf(row) + 1;
  const sel = el('select', { name: 'fs' }, FS.map((f) => el('option', { selected: f === fs ? '' : null }, f)));
  const sizeIn = el('input', { name: 'psize', value: size, spellcheck: 'false' });
  const labelIn = el('input', { name: 'label', value: label, spellcheck: 'false' });
  const rm = el('button', { type: 'button' }, 'Remove');
  rm.addEventListener('click', () => { row.remove(); renumber(); updatePlan(); });
  row.append(el('label', {}, el('span', { class: 'pn' }, ''), sel), el('label', {}, 'size (or fill)', sizeIn), el('label', {}, 'label', labelIn), rm);
  row.renumber = () => {
    row.querySelector('.pn').textContent = `#${n()} filesystem`;
    rm.setAttribute('aria-label', `Remove partition ${n()}`);
  };
  return row;
}
function renumber() { for (const r of $('#plan-parts').children) r.renumber(); }
$('#plan-parts').append(partRow('fat32', '256MiB', 'BOOT'), partRow('ext4', 'fill', 'rootfs'));
renumber();
$('#plan-add').addEventListener('click', () => { $('#plan-parts').append(partRow('ext4', 'fill', '')); renumber(); updatePlan(); });

const q = (s) => JSON.stringify(s);
/** The form as a TOML spec (the same text `blockwise plan` reads). */
export function formToml() {
  const f = $('#plan-form');
  const v = (name) => f.elements[name].value.trim();
  const lines = ['[image]'];
  if (v('size')) lines.push(`size = ${q(v('size'))}`);
  lines.push(`erase-block = ${q(v('erase-block'))}`, `sector-size = ${v('sector-size')}`, `table = ${q(v('table'))}`);
  for (const row of $('#plan-parts').children) {
    const fs = row.querySelector('[name=fs]').value;
    const size = row.querySelector('[name=psize]').value.trim();
    const label = row.querySelector('[name=label]').value.trim();
    lines.push('', '[[partition]]', `fs = ${q(fs)}`, `size = ${q(size)}`);
    if (label && fs !== 'none') lines.push(`label = ${q(label)}`);
  }
  return `${lines.join('\n')}\n`;
}

function planView(p) {
  const e = p.erase_block_bytes;
  const notes = [];
  for (const part of p.partitions) {
    const f = part.filesystem;
    if (!f || (!f.notes && f.fat_start_bytes === undefined && f.block_bytes === undefined)) continue;
    let head;
    if (f.fat_start_bytes !== undefined) {
      head = `Partition ${part.index}, ${f.kind}: ${f.cluster_count} clusters of ${fmtSize(f.cluster_bytes)}, ${f.reserved_sectors} reserved sectors, ${f.fat_count} FATs of ${f.fat_sectors} sectors; FAT at ${fmtSize(f.fat_start_bytes)}, data at ${fmtSize(f.data_start_bytes)} from the start of the disk.`;
    } else {
      head = `Partition ${part.index}, ${f.kind}: ${f.blocks} blocks of ${f.block_bytes} B, ${f.inodes} inodes, stride ${f.stride}, stripe width ${f.stripe_width}${f.journal_start_bytes != null ? `, journal at ${fmtSize(f.journal_start_bytes)}` : ''}.`;
    }
    notes.push(el('p', {}, head), f.notes ? el('ul', { class: 'notes' }, f.notes.map((n) => el('li', {}, n))) : null);
  }
  const table = p.table.kind === 'none' ? 'no partition table' : `${p.table.kind.toUpperCase()} table`;
  return [
    planVerdict(p, e),
    el('p', {}, `Disk: ${fmtSize(p.size_bytes)} (${p.size_bytes} bytes), ${table}, ${p.sector_bytes} B sectors, erase block ${fmtSize(e)}.`),
    p.gpt ? el('p', { class: 'small' }, `GPT: usable LBAs ${p.gpt.first_usable_lba}..${p.gpt.last_usable_lba}; backup header at LBA ${p.gpt.backup_header_lba}.`) : null,
    layoutTable(p, e),
    drawing(p, e, $('#plan-out')),
    ...notes,
  ];
}

let planTimer = 0;
function updatePlan() {
  clearTimeout(planTimer);
  planTimer = setTimeout(() => {
    const toml = formToml();
    $('#plan-toml').textContent = toml;
    try {
      const p = plan(toml);
      window.__lastPlan = p;
      put($('#plan-out'), ...planView(p));
    } catch (err) {
      window.__lastPlan = { error: err.name, message: err.message };
      put($('#plan-out'), errorBox(err));
    }
  }, 60);
}
$('#plan-form').addEventListener('input', updatePlan);
$('#plan-form').addEventListener('change', updatePlan);
$('#plan-form').addEventListener('submit', (ev) => ev.preventDefault());
$('#plan-copy').addEventListener('click', async () => {
  try { await navigator.clipboard.writeText($('#plan-toml').textContent); $('#plan-copy').textContent = 'Copied'; } catch { $('#plan-copy').textContent = 'Select and copy'; }
  setTimeout(() => { $('#plan-copy').textContent = 'Copy'; }, 1500);
});

// ---------------------------------------------------------------- Build
let buildFiles = []; // [{ path, file }]

function setBuildFiles(list) {
  // A folder's files all start with the folder's name: its contents are the filesystem.
  const tops = new Set(list.map((f) => f.path.split('/')[0]));
  const strip = tops.size === 1 && list.every((f) => f.path.includes('/'));
  buildFiles = list.map((f) => ({ path: strip ? f.path.slice(f.path.indexOf('/') + 1) : f.path, file: f.file }));
  const total = buildFiles.reduce((n, f) => n + f.file.size, 0);
  $('#build-list').textContent = buildFiles.length
    ? `${buildFiles.length} files, ${fmtSize(total)}: ${buildFiles.slice(0, 8).map((f) => f.path).join(', ')}${buildFiles.length > 8 ? ', …' : ''}`
    : '';
  $('#build-go').disabled = buildFiles.length === 0;
}

for (const id of ['#build-dir', '#build-files']) {
  $(id).addEventListener('change', (ev) => setBuildFiles([...ev.target.files].map((file) => ({ path: file.webkitRelativePath || file.name, file }))));
}

async function entriesOf(entry, prefix, out) {
  if (entry.isFile) {
    out.push({ path: prefix + entry.name, file: await new Promise((ok, bad) => entry.file(ok, bad)) });
  } else if (entry.isDirectory) {
    const reader = entry.createReader();
    for (;;) {
      const batch = await new Promise((ok, bad) => reader.readEntries(ok, bad));
      if (!batch.length) break;
      for (const child of batch) await entriesOf(child, `${prefix}${entry.name}/`, out);
    }
  }
}

dropZone($('#build-drop'), async (dt) => {
  const out = [];
  const items = [...(dt.items || [])];
  const entries = items.map((i) => (i.webkitGetAsEntry ? i.webkitGetAsEntry() : null));
  if (entries.length && entries.every(Boolean)) {
    for (const e of entries) await entriesOf(e, '', out);
  } else {
    for (const file of dt.files) out.push({ path: file.name, file });
  }
  setBuildFiles(out);
});

$('#build-go').addEventListener('click', async () => {
  const f = $('#build-form');
  const v = (n) => f.elements[n].value.trim();
  const lines = ['[image]', `size = ${q(v('size'))}`, `table = ${q(v('table'))}`, '', '[[partition]]', `fs = ${q(v('fs'))}`, 'size = "fill"'];
  if (v('label')) lines.push(`label = ${q(v('label'))}`);
  const toml = `${lines.join('\n')}\n`;
  const out = $('#build-out');
  put(out, el('p', { role: 'status' }, 'Building…'));
  try {
    const files = [];
    for (const { path, file } of buildFiles) {
      files.push({ path, data: new Uint8Array(await file.arrayBuffer()), mtime: Math.floor(file.lastModified / 1000) });
    }
    const t0 = performance.now();
    const img = build(toml, files);
    const ms = performance.now() - t0;
    const blob = img.blob();
    const url = URL.createObjectURL(blob);
    const name = `blockwise-${v('fs')}.img`;
    const a = el('a', { href: url, download: name, id: 'build-download' }, `Download ${name} (${fmtSize(img.size)})`);
    put(out, 
      el('p', { id: 'build-verdict', class: 'verdict ok' }, `Built ${fmtSize(img.size)} in ${ms.toFixed(0)} ms: ${buildFiles.length} files, ${fmtSize(img.dataBytes)} of data.`),
      a,
      img.warnings.length ? el('ul', { class: 'findings' }, img.warnings.map((w) => el('li', {}, el('span', { class: 'sev warning' }, 'warning'), ' ', w))) : null,
      el('details', {}, el('summary', {}, 'Spec used'), el('pre', {}, toml)),
    );
    window.__lastBuild = { size: img.size, ms };
    a.click();
  } catch (err) {
    window.__lastBuild = { error: err.name, message: err.message };
    put(out, errorBox(err));
  }
});

// ---------------------------------------------------------------- start
const t0 = performance.now();
await init();
window.__ready = { initMs: performance.now() - t0 };
$('#loading').hidden = true;
$('#version').textContent = `blockwise ${version()} — WebAssembly; images above ${fmtSize(maxBuildBytes())} are built with the CLI.`;
updatePlan();
