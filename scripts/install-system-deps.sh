#!/usr/bin/env bash
# Installs what cachelab needs from the OS packages, and only what is missing:
# memcached (the server every verb can start privately) and Python's venv module; with the
# argument `test`, also chromium (for the report's headless-browser test), PostgreSQL (the
# tests of `cachelab tiers --dsn` start a private cluster from its binaries) and twemproxy
# (package nutcracker, installed in /usr/sbin: the pool tests check its key placement), and
# redis-server (the RESP tests start private servers; the package's own daemon is stopped, as
# the tests never use it).
# Rust (cargo, at least Cargo.toml's rust-version) and Python 3.9+ must already be there; this
# says so if they are not. (The wheel `make wheel` builds installs without Rust: its users need
# Python and memcached only.)
set -euo pipefail

need=()
command -v memcached >/dev/null 2>&1 || need+=(memcached)
if [ "${1:-}" = "test" ]; then
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null 2>&1 || need+=(postgresql)
  command -v nutcracker >/dev/null 2>&1 || [ -x /usr/sbin/nutcracker ] || need+=(nutcracker)
  command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
fi
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
if [ "${#need[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing from the OS packages: ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${need[@]}" >/dev/null
  # Debian's redis-server package starts a daemon on 6379 where services may start: stop it.
  if [[ " ${need[*]} " == *" redis-server "* ]]; then
    $sudo service redis-server stop >/dev/null 2>&1 || true
  fi
fi
# The oldest Rust that builds cachelab: the workspace's rust-version, stated once in Cargo.toml.
rust_min=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' "$(dirname "$0")/../Cargo.toml")
command -v cargo >/dev/null 2>&1 || { echo "cargo (Rust >= $rust_min) is required: https://rustup.rs" >&2; exit 1; }
rust_now=$(rustc --version 2>/dev/null | awk '{print $2}') || true
if [ "$(printf '%s\n' "$rust_min" "${rust_now:-0}" | sort -V | head -n 1)" != "$rust_min" ]; then
  echo "Rust >= $rust_min is required (Cargo.toml's rust-version); rustc is ${rust_now:-missing}: rustup update" >&2
  exit 1
fi
python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' || { echo "Python >= 3.9 is required" >&2; exit 1; }
memcached -V >&2
