#!/bin/sh
# Makes sure a Rust compiler that can build for wasm32-unknown-unknown is at hand.
#
# First it tries the normal way, `rustup target add wasm32-unknown-unknown`.
# Where rustup cannot download the target (no route to its server), it unpacks Debian trixie's rustc 1.85 with its wasm32 standard library and
# wasm-ld (plus the trixie C runtime they need) into a private folder, and
# writes two wrappers that start them with trixie's own dynamic loader, so the
# host system is left untouched. Nothing is installed system-wide.
#
# Usage:
#   eval "$(sh scripts/wasm32-rustc.sh)"
#   cargo build --target wasm32-unknown-unknown -p <wasm crate>
#
# It prints the environment to use (RUSTC, the wasm32 linker, a separate
# CARGO_TARGET_DIR) on stdout; progress goes to stderr. It is idempotent: a
# second run reuses the unpacked toolchain. Where the active rustup toolchain
# already has the wasm32 target, it prints nothing and the normal toolchain is
# used. WASM32_RUSTC_FORCE_DEBIAN=1 skips rustup. Set WASM32_RUSTC_DIR to choose where it unpacks (default
# $HOME/.cache/wasm32-rustc).
set -eu

has_target() { [ -d "$(rustc --print sysroot 2>/dev/null)/lib/rustlib/wasm32-unknown-unknown/lib" ]; }
if [ -z "${WASM32_RUSTC_FORCE_DEBIAN:-}" ]; then
  has_target && exit 0
  if command -v rustup >/dev/null 2>&1 && timeout 180 rustup target add wasm32-unknown-unknown >&2 && has_target; then
    exit 0
  fi
  echo "wasm32-rustc: rustup could not add the target; using Debian's rustc instead" >&2
fi

DIR="${WASM32_RUSTC_DIR:-$HOME/.cache/wasm32-rustc}"
ROOT="$DIR/root"
LIB="$ROOT/usr/lib/x86_64-linux-gnu"
PKGS="rustc libstd-rust-1.85 libstd-rust-dev libstd-rust-dev-wasm32 libllvm19 lld-19
gcc-14-base libbsd0 libc6 libedit2 libffi8 libgcc-s1 liblzma5 libmd0 libstdc++6
libtinfo6 libxml2 libz3-4 libzstd1 zlib1g libicu76"

if [ ! -x "$DIR/bin/rustc" ] || ! "$DIR/bin/rustc" --version >/dev/null 2>&1; then
  echo "wasm32-rustc: unpacking Debian trixie rustc into $DIR" >&2
  rm -rf "$DIR"
  mkdir -p "$DIR/apt/lists/partial" "$DIR/apt/cache/archives/partial" "$DIR/debs" "$ROOT" "$DIR/bin"
  cat > "$DIR/apt/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
SRC
  APT="-oDir::Etc::SourceList=$DIR/apt/sources.list -oDir::Etc::SourceParts=/dev/null -oDir::State::Lists=$DIR/apt/lists -oDir::Cache=$DIR/apt/cache -oAPT::Sandbox::User=root"
  # shellcheck disable=SC2086
  apt-get $APT -qq update >&2
  # shellcheck disable=SC2086
  (cd "$DIR/debs" && apt-get $APT -qq download $PKGS >&2)
  for deb in "$DIR"/debs/*.deb; do dpkg -x "$deb" "$ROOT"; done
  for tool in rustc:usr/bin/rustc wasm-ld:usr/bin/wasm-ld-19; do
    name=${tool%%:*}; path=${tool#*:}
    cat > "$DIR/bin/$name" <<WRAP
#!/bin/sh
exec "$LIB/ld-linux-x86-64.so.2" --library-path "$LIB" "$ROOT/$path" "\$@"
WRAP
    chmod +x "$DIR/bin/$name"
  done
  rm -rf "$DIR/debs" "$DIR/apt"
  "$DIR/bin/rustc" --version >&2
fi

echo "export RUSTC='$DIR/bin/rustc'"
echo "export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER='$DIR/bin/wasm-ld'"
echo "export CARGO_TARGET_DIR=\"\${CARGO_TARGET_DIR:-target}/wasm32-rustc\""
