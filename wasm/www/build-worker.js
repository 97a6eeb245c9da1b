// Builds an image off the main thread, so the page stays responsive and Cancel is immediate
// (the page terminates this worker). The Rust core plans and assembles the image from the
// files' names, sizes and times (prepareBuild); the image is a Blob of the metadata bytes and
// slices of the dropped Files themselves (no copy of the content is made); the .bmap is
// hashed by reading that very Blob in order, which is where the files are read.
//
// Messages in:  { toml, entries: [{ path, size, mtime, partition, dir }], files: [File|null] }
// Messages out: { type: 'phase', phase } · { type: 'planned', … } · { type: 'progress', done, total }
//               · { type: 'done', outputs: [{ name, blob }], ms } · { type: 'error', name, message, key }
import init, { prepareBuild } from './pkg/blockwise_wasm.js';

const ready = init();

/** What a build offers beside the image. Android sparse (`.simg`) and seekable zstd
 * (`.img.zst`) join this list when crates/container's encoders land: each is
 * `job.encode(format)` turning the same image map into a Blob, the same way. */
async function outputs(job, image, progress) {
  const h = job.bmapHasher();
  try {
    const total = h.totalBytes;
    let last = 0;
    for (let r = h.next(); r; r = h.next()) {
      let bytes;
      try {
        bytes = new Uint8Array(await image.slice(r[0], r[1]).arrayBuffer());
      } catch (e) {
        const err = new Error(`reading the chosen files failed (${e.name}: ${e.message}): a file changed or was removed after it was chosen; choose the folder again`);
        err.name = 'IoError';
        throw err;
      }
      h.feed(bytes);
      const now = performance.now();
      if (now - last > 100) {
        last = now;
        progress(h.doneBytes, total);
      }
    }
    progress(total, total);
    return [{ suffix: '.bmap', blob: new Blob([h.text()], { type: 'application/xml' }) }];
  } finally {
    h.free();
  }
}

self.onmessage = async (ev) => {
  const { toml, entries, files } = ev.data;
  const t0 = performance.now();
  try {
    await ready;
    self.postMessage({ type: 'phase', phase: 'planning and writing the metadata' });
    const job = prepareBuild(toml, entries);
    try {
      const image = job.imageBlob(files);
      self.postMessage({
        type: 'planned', size: job.size, metadataBytes: job.metadataBytes,
        contentBytes: job.contentBytes, warnings: job.warnings, plan: job.plan,
        ms: performance.now() - t0,
      });
      self.postMessage({ type: 'phase', phase: 'reading the files for the .bmap' });
      const extra = await outputs(job, image, (done, total) => self.postMessage({ type: 'progress', done, total }));
      self.postMessage({ type: 'done', image, extra, ms: performance.now() - t0 });
    } finally {
      job.free();
    }
  } catch (e) {
    self.postMessage({ type: 'error', name: e && e.name ? e.name : 'Error', message: e && e.message ? e.message : String(e), key: e && e.key });
  }
};
