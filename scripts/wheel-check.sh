#!/usr/bin/env bash
# The wheel as a user without Rust meets it: installs WHEEL (default: the newest
# dist/cachelab-*.whl, from `make wheel`) with pip into a fresh virtualenv, with every
# directory holding cargo, rustc or rustup taken off PATH and binary packages only (nothing
# is compiled; the dependencies come from the registry or pip's cache), then runs
# `cachelab --version`, imports cachelab._core and runs `cachelab run --quick` there, from a
# directory outside the clone. Memcached comes from PATH or CACHELAB_MEMCACHED, as for any
# user. Everything it makes is in one temporary directory, removed at exit (KEEP=1 keeps it).
# Usage: scripts/wheel-check.sh [WHEEL]   (PYTHON=python3.X picks the interpreter)
set -euo pipefail

say() { echo "wheel-check: $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }

wheel=${1:-$(ls -t dist/cachelab-*.whl 2>/dev/null | head -n 1 || true)}
[ -n "$wheel" ] && [ -f "$wheel" ] || fail "no wheel (make wheel writes dist/cachelab-*.whl)"
wheel=$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")
python=$(command -v "${PYTHON:-python3}") || fail "no ${PYTHON:-python3} on PATH"
# the interpreter itself, not a shim that looks for its version on PATH
python=$("$python" -c 'import sys; print(sys.executable)')

work=$(mktemp -d "${TMPDIR:-/tmp}/cachelab-wheel-check.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then say "keeping $work"; else trap 'rm -rf "$work"' EXIT; fi

bare=""
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  if [ -z "$d" ] || [ -e "$d/cargo" ] || [ -e "$d/rustc" ] || [ -e "$d/rustup" ]; then continue; fi
  bare="${bare:+$bare:}$d"
done

"$python" -m venv "$work/venv"
# inside: the venv first, no Rust, nothing of this clone or of another venv on the import path
inside() {
  (cd "$work" && env -u PYTHONPATH -u VIRTUAL_ENV -u CARGO -u RUSTC -u PYO3_PYTHON \
    PATH="$work/venv/bin:$bare" "$@")
}
for tool in cargo rustc rustup; do
  if inside sh -c "command -v $tool" >/dev/null; then fail "$tool is still on PATH inside"; fi
done
say "no cargo, rustc or rustup on PATH inside; installing $(basename "$wheel")"
start=$SECONDS
inside python -m pip install -q --only-binary :all: "$wheel" || fail "pip install"
say "installed in $((SECONDS - start)) s"
inside cachelab --version || fail "cachelab --version"
where=$(inside python -c 'import cachelab, cachelab._core; print(cachelab._core.__file__)') \
  || fail "import cachelab._core"
case "$where" in "$work/venv/"*) ;; *) fail "cachelab._core imported from $where, not the venv" ;; esac
say "cachelab._core from $where"
start=$SECONDS
rc=0
inside cachelab run --quick --out "$work/out" >"$work/run.txt" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then tail -n 20 "$work/run.txt" >&2; fail "cachelab run --quick: exit $rc"; fi
[ -s "$work/out/report.html" ] || fail "cachelab run --quick wrote no report.html"
say "cachelab run --quick: exit 0, report.html written, $((SECONDS - start)) s"
say "OK"
