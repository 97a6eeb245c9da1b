// Checks an image in a container (xz, gzip, zstd, bzip2, lz4, zip, Android sparse) off the
// main thread: the CLI's own decoders, compiled to wasm, read the File through FileReaderSync
// (synchronous reads, which only workers have) — random access through a sparse chunk map,
// a zstd seek table or an xz index; a stream decoded forward keeping only what verify asks
// for. Nothing is unpacked into memory or onto disk; the answer carries the worker's wasm
// memory size (its peak: linear memory never shrinks).
//
// Message in:   { blob, options }
// Messages out: { type: 'progress', read, size } (at most every 200 ms while the file is
//               read) · { type: 'done', r } · { type: 'error', name, message, key }
// The page stops a check by terminating the worker.
import init, { verifyContainer } from './pkg/blockwise_wasm.js';

const ready = init();

self.onmessage = async (ev) => {
  const { blob, options } = ev.data;
  try {
    const wasm = await ready;
    const progress = (read, size) => self.postMessage({ type: 'progress', read, size });
    const r = verifyContainer(blob, options, progress);
    // Linear memory only grows: its size now is the most the check ever held at once.
    r.workerMemoryBytes = wasm.memory.buffer.byteLength;
    self.postMessage({ type: 'done', r });
  } catch (e) {
    self.postMessage({ type: 'error', name: e && e.name ? e.name : 'Error', message: e && e.message ? e.message : String(e), key: e && e.key });
  }
};
