#!/usr/bin/env bash
# Checks a built wheel as PyPI and pip will judge it: abi3 for CPython >= 3.9, manylinux_2_17
# (glibc 2.17, i.e. manylinux2014) by `auditwheel show`, and liblzma linked in rather than
# required from the system. Used by test.sh (CI) and wheel-check.sh (by hand, before a release).
#   bindings/python/audit-wheel.sh WHEEL   (auditwheel from PATH)
set -euo pipefail
wheel="${1:?usage: audit-wheel.sh WHEEL}"
case "$(basename "$wheel")" in
  *-cp39-abi3-*manylinux_2_17_x86_64*.whl) ;;
  *) echo "audit-wheel.sh: unexpected wheel tag: $(basename "$wheel")" >&2; exit 1 ;;
esac
show="$(auditwheel show "$wheel")"
echo "$show"
grep -q '"manylinux_2_17_x86_64"' <<<"$show" || {
  echo "audit-wheel.sh: auditwheel does not find the wheel manylinux_2_17" >&2
  exit 1
}
if grep -qi lzma <<<"$show"; then
  echo "audit-wheel.sh: the wheel links an external liblzma" >&2
  exit 1
fi
