#!/usr/bin/env bash
# Tests the Python package: a venv in bindings/python/.venv (git-ignored), the extension
# built into it by maturin, the CLI binary (tests compare with its --json), then pytest,
# mypy --strict on the examples and stubtest.
# Works on a fresh machine (root or not) and can be run again: the venv and the cargo
# build are reused. Arguments go to pytest.
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
python -m pip install --quiet --disable-pip-version-check "maturin>=1.5,<2" pytest mypy

echo "== maturin develop (bindings/python)"
# The workspace's target dir and dev profile (optimised dependencies): no second build tree.
maturin develop --manifest-path "$here/Cargo.toml"

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
