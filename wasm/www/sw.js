// Offline after the first visit: the page's few files are cached when the service worker
// installs and served from the cache afterwards. wasm/build.sh writes the build's content hash
// into VERSION, so a new build installs a new cache (and drops the old one).
const VERSION = 'blockwise-__BUILD_HASH__';
const FILES = ['./', 'index.html', 'app.js', 'draw.js', 'build-worker.js', 'check-worker.js', 'style.css', 'pkg/blockwise_wasm.js', 'pkg/blockwise_wasm_bg.wasm'];

self.addEventListener('install', (ev) => {
  ev.waitUntil(caches.open(VERSION).then((c) => c.addAll(FILES)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (ev) => {
  ev.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((k) => k.startsWith('blockwise-') && k !== VERSION).map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

self.addEventListener('fetch', (ev) => {
  const req = ev.request;
  if (req.method !== 'GET' || new URL(req.url).origin !== self.location.origin) return;
  ev.respondWith(caches.open(VERSION).then(async (cache) => {
    const hit = await cache.match(req, { ignoreSearch: true });
    return hit || fetch(req);
  }));
});
