// The drawing of a plan or a report: the whole disk, then each partition's first erase
// blocks with its filesystem regions on the grid. Every number comes from the Rust core (the
// plan/report JSON and its `rows`: each partition's worst finding); this file only places it.
// Colours are CSS classes (style.css), so dark mode recolours the drawing.

const SVG = 'http://www.w3.org/2000/svg';
export function svg(tag, attrs = {}, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

/** 4 MiB, 31.5 KiB, 123 B: exact units when they divide, else two decimals (as the CLI). */
export function fmtSize(b) {
  const units = [['TiB', 2 ** 40], ['GiB', 2 ** 30], ['MiB', 2 ** 20], ['KiB', 2 ** 10]];
  for (const [name, unit] of units) {
    if (b >= unit) {
      const v = b / unit;
      return `${Number.isInteger(v) ? v : v.toFixed(2).replace(/0$/, '')} ${name}`;
    }
  }
  return `${b} B`;
}

/** Regions inside a partition worth drawing: [name, absolute offset, must be on the grid]. */
export function regions(p) {
  const f = p.filesystem || {};
  const out = [['start', p.start_bytes, true]];
  if (f.fat_start_bytes !== undefined) {
    out.push(['FAT', f.fat_start_bytes, false]);
    out.push(['data', f.data_start_bytes, true]);
  }
  if (f.inode_table_start_bytes !== undefined && f.inode_table_start_bytes !== null) out.push(['inodes', f.inode_table_start_bytes, false]);
  if (f.journal_start_bytes !== undefined && f.journal_start_bytes !== null) out.push(['journal', f.journal_start_bytes, true]);
  return out;
}

let hatchN = 0; // unique pattern ids: several drawings share the document
const TEXT_W = 6.6; // px per character at font-size 11, for label placement

/** Places labels [{x, w}] on rows so that none overlap: returns the row of each. */
function labelRows(items, gap = 4) {
  const ends = [];
  return items.map((it) => {
    let row = ends.findIndex((end) => it.x >= end + gap);
    if (row < 0) { row = ends.length; ends.push(-Infinity); }
    ends[row] = it.x + it.w;
    return row;
  });
}

/** Offsets → x: piecewise linear over the starts and ends, so that every partition gets at
 * least `minW` pixels (a 4 MiB partition on a 2 TiB disk still shows) and free space gives
 * way. */
function scale(parts, total, W, minW) {
  const cuts = new Set([0, total]);
  for (const p of parts) {
    cuts.add(Math.min(p.start_bytes, total));
    cuts.add(Math.min(p.start_bytes + p.size_bytes, total));
  }
  const xs = [...cuts].sort((a, b) => a - b);
  const iv = xs.slice(1).map((b, i) => ({ a: xs[i], b, w: ((b - xs[i]) / total) * W }));
  const ofPart = parts.map((p) => iv.filter((v) => v.a >= p.start_bytes && v.b <= p.start_bytes + p.size_bytes && v.b > v.a));
  for (let round = 0; round < 6; round++) {
    const fixed = new Set();
    ofPart.forEach((list) => {
      const s = list.reduce((n, v) => n + v.w, 0);
      if (list.length && s < minW - 0.01) {
        for (const v of list) { v.w = s > 0 ? (v.w * minW) / s : minW / list.length; fixed.add(v); }
      }
      if (list.length && s <= minW + 0.01) for (const v of list) fixed.add(v);
    });
    const excess = iv.reduce((n, v) => n + v.w, 0) - W;
    if (excess <= 0.5) break;
    const free = iv.filter((v) => !fixed.has(v));
    const room = free.reduce((n, v) => n + v.w, 0);
    if (room <= excess) break;
    for (const v of free) v.w *= (room - excess) / room;
  }
  let x = 0;
  for (const v of iv) { v.x = x; x += v.w; }
  const span = x || 1;
  return (off) => {
    const o = Math.max(0, Math.min(off, total));
    const v = iv.find((q) => o >= q.a && o <= q.b) || iv[iv.length - 1];
    const t = v.b > v.a ? (o - v.a) / (v.b - v.a) : 0;
    return ((v.x + t * v.w) / span) * W;
  };
}

/** Lanes for overlapping partitions (a broken table): the lane of each, and how many. */
function lanes(parts) {
  const order = parts.map((p, i) => i).sort((a, b) => parts[a].start_bytes - parts[b].start_bytes);
  const laneEnd = [];
  const lane = [];
  for (const i of order) {
    const p = parts[i];
    let l = laneEnd.findIndex((end) => p.start_bytes >= end);
    if (l < 0) { l = laneEnd.length; laneEnd.push(0); }
    laneEnd[l] = p.start_bytes + p.size_bytes;
    lane[i] = l;
  }
  return { lane, count: Math.max(1, laneEnd.length) };
}

function markOf(rows, index) {
  return (rows || []).find((m) => m.index === index) || { severity: null, past_end: false, notes: [] };
}

/**
 * The drawing. `d`: a plan or report (size_bytes, erase_block_bytes, partitions, extended?),
 * `rows`: its row marks. `opts.width`: the pixels at hand; `opts.onDrop(partitionIndex,
 * dataTransfer)`: makes each filesystem partition a drop zone.
 */
export function drawing(d, rows, opts = {}) {
  const W = Math.max(300, Math.min(opts.width || 600, 820));
  const e = d.erase_block_bytes;
  const parts = d.partitions;
  const ends = parts.map((p) => p.start_bytes + p.size_bytes);
  const total = Math.max(d.size_bytes, ...ends, 1);
  const pastEnd = total > d.size_bytes;
  const L = lanes(parts);
  const laneH = L.count > 1 ? 20 : 28;
  const barH = laneH * L.count;
  const labelH = 14;
  // Labels of segments too narrow for their number go above the bar.
  const X = scale(parts, total, W, 12);
  const inside = [];
  const above = [];
  parts.forEach((p, i) => {
    const x0 = X(p.start_bytes);
    const x1 = Math.max(X(Math.min(p.start_bytes + p.size_bytes, total)), x0 + 2);
    const text = String(p.index);
    const w = text.length * TEXT_W + 4;
    if (x1 - x0 >= w + 4) inside.push({ i, x: x0 + 4 });
    else above.push({ i, x: Math.min(Math.max((x0 + x1) / 2 - w / 2, 0), W - w), w, text, cx: (x0 + x1) / 2 });
  });
  const aboveRows = labelRows(above);
  const nAbove = above.length ? Math.max(...aboveRows) + 1 : 0;
  const extH = d.extended ? 16 : 0;
  const top = 18 + nAbove * labelH + extH;
  const stripH = 46;
  const stripGap = 22;
  const stripTop = top + barH + (pastEnd ? 24 : 14);
  const H = stripTop + parts.length * (stripH + stripGap) + 4;
  const s = svg('svg', { class: 'drawing', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'Layout drawing: the whole disk, then each partition on the erase-block grid' });
  s.append(svg('title', {}, 'Partitions and filesystem regions on the erase-block grid'));
  const defs = svg('defs');
  hatchN += 1;
  const hatchId = `hatch-${hatchN}`;
  const pat = svg('pattern', { id: hatchId, width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' });
  pat.append(svg('line', { x1: 0, y1: 0, x2: 0, y2: 6, class: 'hatch-line' }));
  defs.append(pat);
  s.append(defs);
  s.append(svg('text', { x: 0, y: 12, 'font-size': 11, class: 'muted' }, `whole disk, ${fmtSize(d.size_bytes)}${pastEnd ? ` — partitions reach ${fmtSize(total)}, past its end` : ''}`));
  s.append(svg('rect', { x: 0, y: top, width: X(d.size_bytes), height: barH, class: 'free' }));
  if (d.extended) {
    const x0 = X(d.extended.start_bytes);
    const x1 = X(d.extended.start_bytes + d.extended.size_bytes);
    const logical = parts.filter((p) => p.logical).map((p) => p.index);
    s.append(svg('rect', { x: x0, y: top - 4, width: Math.max(x1 - x0, 2), height: barH + 8, class: 'extended', 'data-role': 'extended' }));
    const t = `extended partition: logical ${logical.length > 1 ? `${logical[0]}–${logical[logical.length - 1]}` : logical.join('')}`;
    s.append(svg('text', { x: Math.min(x0, W - t.length * TEXT_W), y: top - 7, 'font-size': 11, class: 'muted' }, t));
  }
  parts.forEach((p, i) => {
    const m = markOf(rows, p.index);
    const y = top + L.lane[i] * laneH;
    const x0 = X(p.start_bytes);
    const inEnd = Math.min(p.start_bytes + p.size_bytes, d.size_bytes);
    const x1 = Math.max(X(Math.max(inEnd, p.start_bytes)), x0 + 2);
    const f = p.filesystem || {};
    const droppable = Boolean(opts.onDrop) && (f.fat_start_bytes !== undefined || f.block_bytes !== undefined);
    const g = svg('g', { 'data-index': p.index, class: droppable ? 'dropzone' : null });
    const cls = `seg s${(i % 6) + 1}${m.severity === 'error' ? ' error' : m.severity === 'warning' ? ' warning' : ''}${p.logical ? ' logical' : ''}`;
    const rect = svg('rect', { x: x0, y, width: Math.max(x1 - x0, 2), height: laneH, class: cls });
    rect.append(svg('title', {}, `partition ${p.index}: ${fmtSize(p.start_bytes)} + ${fmtSize(p.size_bytes)}${m.notes.length ? ` — ${m.notes.map((n) => n.text).join('; ')}` : ''}`));
    g.append(rect);
    if (p.start_bytes + p.size_bytes > d.size_bytes) {
      const px0 = X(Math.max(p.start_bytes, d.size_bytes));
      const px1 = X(p.start_bytes + p.size_bytes);
      g.append(svg('rect', { x: px0, y, width: Math.max(px1 - px0, 3), height: laneH, class: 'past-end', style: `fill: url(#${hatchId})`, 'data-past-end': p.index }));
    }
    const lab = inside.find((q) => q.i === i);
    if (lab) g.append(svg('text', { x: lab.x, y: y + laneH / 2 + 4, 'font-size': 12, class: 'seg-text' }, String(p.index)));
    if (droppable) {
      g.addEventListener('dragover', (ev) => { ev.preventDefault(); g.classList.add('over'); });
      g.addEventListener('dragleave', () => g.classList.remove('over'));
      g.addEventListener('drop', (ev) => { ev.preventDefault(); g.classList.remove('over'); opts.onDrop(p, ev.dataTransfer); });
    }
    s.append(g);
  });
  above.forEach((a, k) => {
    const y = 18 + extH + aboveRows[k] * labelH + 10;
    s.append(svg('line', { x1: a.cx, x2: a.cx, y1: y + 2, y2: top, class: 'leader' }));
    s.append(svg('text', { x: a.x, y, 'font-size': 11, class: 'txt' }, a.text));
  });
  // Overlaps: where two partitions share bytes.
  for (let i = 0; i < parts.length; i++) {
    for (let j = i + 1; j < parts.length; j++) {
      const a = parts[i];
      const b = parts[j];
      const s0 = Math.max(a.start_bytes, b.start_bytes);
      const s1 = Math.min(a.start_bytes + a.size_bytes, b.start_bytes + b.size_bytes);
      if (s1 > s0) {
        s.append(svg('rect', { x: X(s0), y: top, width: Math.max(X(s1) - X(s0), 3), height: barH, class: 'overlap', 'data-overlap': `${a.index},${b.index}` }));
      }
    }
  }
  if (pastEnd) {
    const xe = X(d.size_bytes);
    s.append(svg('line', { x1: xe, x2: xe, y1: top - 4, y2: top + barH + 6, class: 'end-line' }));
    const t = 'end of image';
    s.append(svg('text', { x: Math.max(0, Math.min(xe - (t.length * TEXT_W) / 2, W - t.length * TEXT_W)), y: top + barH + 18, 'font-size': 11, class: 'txt' }, t));
  }
  parts.forEach((p, i) => strip(s, p, i, markOf(rows, p.index), e, W, stripTop + i * (stripH + stripGap)));
  return s;
}

/** One partition's first erase blocks, with its regions as marks on the grid. */
function strip(s, p, i, m, e, W, y) {
  const first = Math.floor(p.start_bytes / e) * e;
  const near = regions(p).map(([, off]) => off).filter((off) => off - first < 8 * e);
  const blocks = Math.max(3, Math.ceil((Math.max(...near) - first) / e) + 1);
  const span = blocks * e;
  const X = (off) => 40 + ((off - first) / span) * (W - 44);
  s.append(svg('text', { x: 0, y: y + 17, 'font-size': 12, class: 'txt' }, `#${p.index}`));
  const px = X(Math.max(p.start_bytes, first));
  const pe = X(Math.min(p.start_bytes + p.size_bytes, first + span));
  s.append(svg('rect', { x: 40, y, width: W - 44, height: 24, class: 'window' }));
  if (pe > px) s.append(svg('rect', { x: px, y, width: pe - px, height: 24, class: `seg s${(i % 6) + 1} body` }));
  if (m.severity === 'error') s.append(svg('rect', { x: 39, y: y - 1, width: W - 42, height: 26, class: 'strip-error', 'data-error': p.index }));
  for (let k = 0; k <= blocks; k++) {
    const x = X(first + k * e);
    s.append(svg('line', { x1: x, x2: x, y1: y - 2, y2: y + 26, class: 'grid-line' }));
  }
  const marks = regions(p).filter(([, off]) => off >= first && off <= first + span)
    .map(([name, off, strict]) => ({ name, x: X(off), cls: off % e === 0 ? 'mark-ok' : (strict ? 'mark-bad' : 'mark-warn') }))
    .sort((a, b) => a.x - b.x);
  for (const m of marks) s.append(svg('line', { x1: m.x, x2: m.x, y1: y, y2: y + 24, class: m.cls, 'stroke-width': 3, 'data-mark': m.name }));
  // Labels right of their mark; marks too close for separate labels share one ("start, FAT,
  // data" at sector 63), coloured by the worst of them; a second line when groups meet.
  const worse = { 'mark-ok': 0, 'mark-warn': 1, 'mark-bad': 2 };
  const groups = [];
  for (const m of marks) {
    const g = groups[groups.length - 1];
    if (g && m.x < g.x + g.w + 4) {
      g.names.push(m.name);
      g.w = g.names.join(', ').length * TEXT_W;
      if (worse[m.cls] > worse[g.cls]) g.cls = m.cls;
    } else {
      groups.push({ x: m.x, names: [m.name], w: m.name.length * TEXT_W, cls: m.cls });
    }
  }
  const placed = groups.map((g) => ({ x: g.x + 3 + g.w > W ? g.x - g.w - 3 : g.x + 3, w: g.w }));
  const rowsOf = labelRows(placed);
  groups.forEach((g, k) => {
    s.append(svg('text', { x: placed[k].x, y: y + 11 + Math.min(rowsOf[k], 1) * 11, 'font-size': 10.5, class: g.cls }, g.names.join(', ')));
  });
  const far = regions(p).filter(([, off]) => off > first + span)
    .map(([name, off]) => `${name} at +${fmtSize(off - p.start_bytes)}${off % e === 0 ? ' (on the grid)' : ' (off the grid)'}`);
  const problem = m.notes.find((n) => n.severity === 'error');
  const caption = problem
    ? `✗ ${problem.text}`
    : `grid: ${fmtSize(e)} erase blocks from ${fmtSize(first)}${far.length ? `; ${far.join(', ')}` : ''}`;
  const maxChars = Math.floor((W - 44) / 6.1);
  s.append(svg('text', { x: 40, y: y + 38, 'font-size': 10, class: problem ? 'mark-bad' : 'muted' }, caption.length > maxChars ? `${caption.slice(0, maxChars - 1)}…` : caption));
}

/** The legend, as HTML (it wraps on a phone). */
export function legend(d, rows) {
  const item = (swatch, text) => {
    const box = svg('svg', { width: 26, height: 14, viewBox: '0 0 26 14', 'aria-hidden': 'true' });
    box.append(...swatch);
    const li = document.createElement('li');
    li.append(box, ` ${text}`);
    return li;
  };
  const ul = document.createElement('ul');
  ul.className = 'legend';
  ul.setAttribute('aria-label', 'Legend');
  const hatch = svg('defs');
  hatchN += 1;
  const hatchId = `hatch-${hatchN}`;
  const pat = svg('pattern', { id: hatchId, width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' });
  pat.append(svg('line', { x1: 0, y1: 0, x2: 0, y2: 6, class: 'hatch-line' }));
  hatch.append(pat);
  ul.append(
    item([svg('rect', { x: 1, y: 1, width: 24, height: 12, class: 'seg s1' })], 'partition'),
    item([svg('rect', { x: 1, y: 1, width: 24, height: 12, class: 'free' })], 'free space'),
    item([svg('line', { x1: 13, x2: 13, y1: 0, y2: 14, class: 'grid-line' })], 'erase-block boundary'),
    item([svg('line', { x1: 13, x2: 13, y1: 0, y2: 14, class: 'mark-ok', 'stroke-width': 3 })], 'region on the grid'),
    item([svg('line', { x1: 13, x2: 13, y1: 0, y2: 14, class: 'mark-warn', 'stroke-width': 3 })], 'off the grid: slower'),
    item([svg('rect', { x: 1, y: 1, width: 24, height: 12, class: 'seg s1 error' })], 'error: not usable as it is'),
  );
  const ends = d.partitions.map((p) => p.start_bytes + p.size_bytes);
  if (ends.some((x) => x > d.size_bytes)) {
    ul.append(item([hatch, svg('rect', { x: 1, y: 1, width: 24, height: 12, class: 'past-end', style: `fill: url(#${hatchId})` })], 'past the end of the image'));
  }
  if ((rows || []).some((r) => r.codes.includes('partition-overlap'))) {
    ul.append(item([svg('rect', { x: 1, y: 1, width: 24, height: 12, class: 'overlap' })], 'overlap'));
  }
  if (d.extended) ul.append(item([svg('rect', { x: 1, y: 1, width: 24, height: 12, class: 'extended' })], 'extended partition (holds the logical ones)'));
  return ul;
}
