#!/usr/bin/env bash
# Builds the browser page: release wasm (opt-level "z", LTO) with the wasm32 toolchain of
# scripts/wasm32-rustc.sh (Debian's Rust 1.85 unless WASM32_RUSTC_FORCE_DEBIAN=0), wasm-bindgen
# --target web at exactly the Cargo.lock version, and the static site in wasm/dist.
# Usage: wasm/build.sh   (from anywhere; idempotent; installs wasm-bindgen-cli if missing)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

toolchain="$root/scripts/wasm32-rustc.sh"
export WASM32_RUSTC_FORCE_DEBIAN="${WASM32_RUSTC_FORCE_DEBIAN-1}"
[ "$WASM32_RUSTC_FORCE_DEBIAN" = 0 ] && unset WASM32_RUSTC_FORCE_DEBIAN
# The version wasm-bindgen-cli must have: the wasm-bindgen crate in Cargo.lock.
bindgen_version="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)"
if ! command -v wasm-bindgen >/dev/null 2>&1 || [ "$(wasm-bindgen --version | awk '{print $2}')" != "$bindgen_version" ]; then
  echo "build.sh: installing wasm-bindgen-cli $bindgen_version" >&2
  # With the host toolchain (rustup stable): the CLI needs a newer Rust than the wasm32 MSRV
  # compiler below. --locked first; a lock file naming a yanked crate falls back to a fresh resolution.
  (unset RUSTC CARGO_TARGET_DIR; cargo install --locked wasm-bindgen-cli --version "$bindgen_version" >&2 \
    || cargo install wasm-bindgen-cli --version "$bindgen_version" >&2)
fi
export PATH="$HOME/.cargo/bin:$PATH"

eval "$(sh "$toolchain")"
# libzstd is C (squashfs zstd in the page writes the CLI's bytes because it is the same
# library): zstd-sys compiles it for wasm32 with clang and its own libc shim.
if ! command -v clang >/dev/null 2>&1; then
  echo "build.sh: clang is needed to compile libzstd for wasm32 (Debian: apt-get install clang)" >&2
  exit 1
fi


# Profiles live in the root manifest; the page's size settings are set here only.
export CARGO_PROFILE_RELEASE_OPT_LEVEL=z CARGO_PROFILE_RELEASE_LTO=true \
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 CARGO_PROFILE_RELEASE_PANIC=abort
# SHA-256 (the .bmap of a build reads every byte through it) at opt-level 3: at "z" it
# hashes about 4x slower. Inflate likewise (Check of a .img.gz or a deflated .zip decodes
# the whole stream through it; see docs/browser.md for the measurement).
# Also the proof that the pure crates build for wasm32 with the MSRV compiler (CI's only
# wasm32 build of them): those the page links, and the container crate beside them.
cargo build --quiet --release --target wasm32-unknown-unknown -p blockwise-wasm -p blockwise-container \
  --config 'profile.release.package.sha2.opt-level = 3' \
  --config 'profile.release.package.miniz_oxide.opt-level = 3' \
  --config 'profile.release.package.crc32fast.opt-level = 3' \
  --config 'profile.release.package.blockwise-container.opt-level = 3'
wasm="${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/release/blockwise_wasm.wasm"

dist="$here/dist"
rm -rf "$dist"
mkdir -p "$dist"
wasm-bindgen --target web --no-typescript --remove-name-section --remove-producers-section --out-dir "$dist/pkg" "$wasm"
cp "$here"/www/* "$dist/"
# The service worker's cache name carries the hash of everything it caches, so a new build
# replaces the cache of the last one.
hash=$(cd "$dist" && find . -type f ! -name sw.js -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
sed -i "s/__BUILD_HASH__/$hash/" "$dist/sw.js"

out="$dist/pkg/blockwise_wasm_bg.wasm"
raw=$(wc -c < "$out")
gz=$(gzip -9 -c "$out" | wc -c)
echo "blockwise wasm: $out: $raw bytes ($((raw / 1024)) KiB), gzipped $gz bytes ($((gz / 1024)) KiB)"
echo "site: $dist (serve it with any static server, e.g. python3 -m http.server -d $dist)"
