#!/usr/bin/env bash
# Cross-builds libmunmapq.dylib for both Apple architectures on Linux and
# inspects the result (scripts/inspect_macho.py). This compiles and links the
# macOS code for real; it does not run it (no Mac here).
#
# Needs Debian's rustc-web, cargo-web and rust-web-src (Rust with the
# standard library's source, for -Zbuild-std) and, from PyPI, ziglang and
# cargo-zigbuild (zig links the Mach-O) and lief (reads it). Pass --install
# to install whatever is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--install" ]; then
  if [ ! -x /usr/bin/cargo ] || [ ! -d /usr/lib/rustlib/src/rust/library ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rustc-web cargo-web rust-web-src >/dev/null
  fi
  python3 -c 'import lief' 2>/dev/null && command -v cargo-zigbuild >/dev/null && command -v python-zig >/dev/null ||
    python3 -m pip install -q ziglang cargo-zigbuild lief
  # pyenv's shims for the new commands
  if command -v pyenv >/dev/null; then pyenv rehash; fi
fi

out=()
for target in aarch64-apple-darwin x86_64-apple-darwin; do
  PATH=/usr/bin:$PATH CARGO=/usr/bin/cargo RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 \
    cargo-zigbuild build --release -Zbuild-std=std,panic_abort --target "$target" \
    -p munmapq-cdylib --target-dir target/macos 2>&1 | grep -vE '^\s+(Compiling|Downloaded|Downloading)|xcrun|SDK|DEVELOPER_DIR|^\s*\|$|^\s*= (note|help)|^warning: `munmapq-(interpose|cdylib)`|^$' || true
  lib="target/macos/$target/release/libmunmapq.dylib"
  [ -f "$lib" ] || { echo "macos-build: $lib was not built"; exit 1; }
  out+=("$lib")
done
python3 scripts/inspect_macho.py interpose/src/hooks.rs "${out[@]}"
