#!/usr/bin/env bash
# The browser tests: builds the page (wasm/build.sh), runs the JS API tests under node
# (wasm-bindgen-test) and the end-to-end test in Debian's Chromium (wasm/tests/e2e.mjs),
# which prints the measurements. Works on a fresh machine as root: installs Chromium,
# node/npm, the oracle tools and the node packages when missing; idempotent. Prints the time
# of each part. The e2e test needs about 6 GiB of free space in $TMPDIR for a moment (a
# 2 GiB image downloaded twice, 1 GiB of content, the CLI's image to compare).
# (The host-side tests of the crate run with the workspace: cargo test --workspace.)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

need=()
for pair in chromium:chromium node:nodejs npm:npm sfdisk:fdisk losetup:mount \
            mkfs.fat:dosfstools fsck.fat:dosfstools mcopy:mtools e2fsck:e2fsprogs debugfs:e2fsprogs \
            truncate:coreutils cmp:diffutils gzip:gzip xz:xz-utils python3:python3 \
            simg2img:android-sdk-libsparse-utils unsquashfs:squashfs-tools fsck.erofs:erofs-utils \
            veritysetup:cryptsetup-bin clang:clang; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "wasm/test.sh: installing ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "wasm/test.sh: missing ${need[*]} (run as root to install them)" >&2
    exit 1
  fi
fi

if [ ! -f "$here/node_modules/playwright-core/package.json" ]; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi

t0=$SECONDS
lap() { echo "   ($(( SECONDS - t0 )) s)"; t0=$SECONDS; }
echo "== wasm/build.sh"
"$here/build.sh"
lap
export PATH="$HOME/.cargo/bin:$PATH"

# The CLI the end-to-end test compares with: scripts/test.sh passes the one its
# `cargo test --workspace` built (BLOCKWISE_BIN); run alone, this builds it.
if [ -z "${BLOCKWISE_BIN:-}" ] || [ ! -x "$BLOCKWISE_BIN" ]; then
  echo "== the CLI the end-to-end test compares with"
  cargo build --quiet --bin blockwise
  unset BLOCKWISE_BIN
  lap
fi

echo "== JS API under node (wasm-bindgen-test)"
(
  export WASM32_RUSTC_FORCE_DEBIAN="${WASM32_RUSTC_FORCE_DEBIAN-1}"
  [ "$WASM32_RUSTC_FORCE_DEBIAN" = 0 ] && unset WASM32_RUSTC_FORCE_DEBIAN
  eval "$(sh "$root/scripts/wasm32-rustc.sh")"
  export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner CARGO_PROFILE_DEV_DEBUG=0
  cargo test --target wasm32-unknown-unknown -p blockwise-wasm --test node
)
lap

echo "== end to end in Chromium"
node "$here/tests/e2e.mjs"
lap
