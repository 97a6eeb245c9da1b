// Checks an image in a container (xz, gzip, zstd, bzip2, lz4, zip, Android sparse) off the
// main thread: the CLI's own decoders, compiled to wasm, read the File through FileReaderSync
// (synchronous reads, which only workers have) — random access through a sparse chunk map,
// a zstd seek table or an xz index; a stream decoded forward keeping only what verify asks
// for. Nothing is unpacked into memory or onto disk.
//
// Message in:   { blob, options }
// Messages out: { type: 'done', r } · { type: 'error', name, message, key }
import init, { verifyContainer } from './pkg/blockwise_wasm.js';

const ready = init();

self.onmessage = async (ev) => {
  const { blob, options } = ev.data;
  try {
    await ready;
    self.postMessage({ type: 'done', r: verifyContainer(blob, options) });
  } catch (e) {
    self.postMessage({ type: 'error', name: e && e.name ? e.name : 'Error', message: e && e.message ? e.message : String(e), key: e && e.key });
  }
};
