// Builds an image off the main thread, so the page stays responsive and Cancel is immediate
// (the page terminates this worker). The Rust core plans and assembles the image from the
// files' names, sizes and times (prepareBuild); squashfs, EROFS and dm-verity read the files'
// bytes while the image is made (FileReaderSync, which workers have). The image is a Blob of
// the metadata bytes and slices of the dropped Files themselves (no copy of the content is
// made); the .bmap and .simg are made by reading that very Blob in order.
//
// Messages in:  { toml, entries: [{ path, size, mtime, partition, dir }], files: [File|null],
//                 zst: true for the seekable .img.zst only }
// Messages out: { type: 'phase', phase } · { type: 'planned', … } · { type: 'progress', done, total }
//               · { type: 'done', image, extra: [{ suffix, kind, blob }], notes, ms }
//               · { type: 'zst', blob, ms }
//               · { type: 'error', name, message, key }
import init, { prepareBuild } from './pkg/blockwise_wasm.js';

const ready = init();

async function readImage(image, start, end) {
  try {
    return new Uint8Array(await image.slice(start, end).arrayBuffer());
  } catch (e) {
    const err = new Error(`reading the chosen files failed (${e.name}: ${e.message}): a file changed or was removed after it was chosen; choose the folder again`);
    err.name = 'IoError';
    throw err;
  }
}

/** What a build offers beside the image: its `.bmap`, its Android sparse `.simg` (the CLI's
 * `-o sd.simg` byte for byte: the same encoder over the same image map), and the dm-verity
 * root hashes as the CLI's `.roothash` files. One pass reads each mapped erase block of the
 * image Blob once, feeding the `.bmap` hasher and the encoder; the `.simg` is a Blob of the
 * chunk headers and slices of the image Blob (its RAW data is the image's own bytes), so no
 * copy of the content is made. `notes` say what is not offered and why. */
async function outputs(job, image, progress) {
  const out = [];
  const notes = [];
  const h = job.bmapHasher();
  let enc = null;
  try {
    enc = job.encoder('simg');
  } catch (e) {
    notes.push(`.simg not offered: ${e.message}`);
  }
  try {
    let last = 0;
    const tick = (done, total) => {
      const now = performance.now();
      if (now - last > 100) { last = now; progress(done, total); }
    };
    if (enc) {
      const parts = [];
      const total = enc.totalBytes;
      for (let w = enc.next(); w; w = enc.next()) {
        const [start, end, mapped] = w;
        let bytes = new Uint8Array(0);
        if (mapped) {
          bytes = await readImage(image, start, end);
          h.feedSpan(start, bytes);
        }
        for (const p of enc.pack(bytes)) parts.push(p instanceof Uint8Array ? p : image.slice(p[0], p[1]));
        tick(enc.doneBytes, total);
      }
      progress(total, total);
      const fin = enc.finish();
      out.push({ suffix: '.simg', replace: '.img', kind: 'Android sparse', blob: new Blob([fin.header, ...parts, fin.trailer], { type: 'application/octet-stream' }) });
    } else {
      const total = h.totalBytes;
      for (let r = h.next(); r; r = h.next()) {
        h.feed(await readImage(image, r[0], r[1]));
        tick(h.doneBytes, total);
      }
      progress(total, total);
    }
    out.unshift({ suffix: '.bmap', kind: 'block map', blob: new Blob([h.text()], { type: 'application/xml' }) });
    const roots = job.rootHashes;
    for (const [name, hex] of roots) {
      out.push({ suffix: roots.length === 1 ? '.roothash' : `.${name}.roothash`, kind: `dm-verity root hash of ${name}`, blob: new Blob([`${hex}\n`], { type: 'text/plain' }), text: hex });
    }
    return { out, notes };
  } finally {
    h.free();
    if (enc) enc.free();
  }
}

/** The image as seekable zstd (the CLI's `-o sd.img.zst` byte for byte: the same encoder,
 * libzstd compiled to wasm): one frame per erase block, read from the image Blob in order.
 * Made only when asked for: the frames are a compressed copy of the image, held in memory. */
async function seekableZstd(job, image, progress) {
  const enc = job.encoder('zst');
  try {
    const parts = [];
    const total = enc.totalBytes;
    let last = 0;
    for (let w = enc.next(); w; w = enc.next()) {
      const [start, end, mapped] = w;
      const bytes = mapped ? await readImage(image, start, end) : new Uint8Array(0);
      for (const p of enc.pack(bytes)) parts.push(p instanceof Uint8Array ? p : image.slice(p[0], p[1]));
      const now = performance.now();
      if (now - last > 100) { last = now; progress(enc.doneBytes, total); }
    }
    const fin = enc.finish();
    return new Blob([fin.header, ...parts, fin.trailer], { type: 'application/zstd' });
  } finally {
    enc.free();
  }
}

self.onmessage = async (ev) => {
  const { toml, entries, files, zst } = ev.data;
  const t0 = performance.now();
  try {
    await ready;
    self.postMessage({ type: 'phase', phase: 'planning and writing the metadata' });
    const job = prepareBuild(toml, entries, files);
    try {
      const image = job.imageBlob(files);
      if (zst) {
        const blob = await seekableZstd(job, image, (done, total) => self.postMessage({ type: 'progress', done, total }));
        self.postMessage({ type: 'zst', blob, ms: performance.now() - t0 });
        return;
      }
      self.postMessage({
        type: 'planned', size: job.size, metadataBytes: job.metadataBytes,
        contentBytes: job.contentBytes, warnings: job.warnings, plan: job.plan,
        ms: performance.now() - t0,
      });
      self.postMessage({ type: 'phase', phase: 'reading the files for the .bmap and .simg' });
      const { out, notes } = await outputs(job, image, (done, total) => self.postMessage({ type: 'progress', done, total }));
      self.postMessage({ type: 'done', image, extra: out, notes, ms: performance.now() - t0 });
    } finally {
      job.free();
    }
  } catch (e) {
    self.postMessage({ type: 'error', name: e && e.name ? e.name : 'Error', message: e && e.message ? e.message : String(e), key: e && e.key });
  }
};
