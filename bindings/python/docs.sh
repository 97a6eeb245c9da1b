#!/usr/bin/env bash
# Renders the Python API page from the docstrings with pdoc: bindings/python/docs/api/
# (git-ignored; CI can publish it). Uses the venv test.sh makes, with the extension built.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import blockwise' 2>/dev/null; then
  echo "docs.sh: run bindings/python/test.sh first (it makes the venv and builds blockwise)" >&2
  exit 1
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "pdoc>=14,<17"
rm -rf "$here/docs/api"
"$venv/bin/python" -m pdoc blockwise --docformat google --no-search -o "$here/docs/api"
echo "docs.sh: $here/docs/api/index.html"
