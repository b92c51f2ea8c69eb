#!/usr/bin/env bash
# Cross-builds libmunmapq.dylib for both Apple architectures on Linux, the
# universal (arm64 + x86_64) one, and the launcher whose embedded library
# must be universal, and inspects every slice (scripts/inspect_macho.py);
# then checks the launcher's reading of dyld's __RESTRICT rule against
# LIEF's on real linker output (inspect_macho.py --restrict-fixtures), and
# that the macOS test set runs nothing through a SIP-protected program
# (scripts/check-macos-tests.py).
# This compiles and links the macOS code for real; it does not run it (no
# Mac here). With --all-targets it also checks every target of the
# workspace (probes and tests included, warnings denied) and links the
# tests (cargo test --no-run) for both Apple targets.
#
# Needs Debian's rustc-web, cargo-web and rust-web-src (Rust with the
# standard library's source, for -Zbuild-std) and, from PyPI, ziglang and
# cargo-zigbuild (zig links the Mach-O) and lief (reads it). Pass --install
# to install whatever is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

install=0 all_targets=0
for a in "$@"; do
  case "$a" in
    --install) install=1 ;;
    --all-targets) all_targets=1 ;;
    *) echo "usage: scripts/macos-build.sh [--install] [--all-targets]" >&2; exit 2 ;;
  esac
done
if [ $install = 1 ]; then
  if [ ! -x /usr/bin/cargo ] || [ ! -d /usr/lib/rustlib/src/rust/library ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rustc-web cargo-web rust-web-src >/dev/null
  fi
  python3 -c 'import lief' 2>/dev/null && command -v cargo-zigbuild >/dev/null && command -v python-zig >/dev/null ||
    python3 -m pip install -q ziglang cargo-zigbuild lief
  # pyenv's shims for the new commands
  if command -v pyenv >/dev/null; then pyenv rehash; fi
fi

# The oldest macOS the code supports: 11.0, the first with arm64 (Big Sur).
# Without it rustc and zig take the host's default (minos 15.0 here), and
# dyld refuses the library on any older system. inspect_macho.py checks
# every slice's minos. Exported, so nested cargos (build.rs) get it too.
export MACOSX_DEPLOYMENT_TARGET=11.0

# Debian's rustc has no prebuilt standard library for Apple targets: build
# it (-Zbuild-std, as an environment variable so nested cargos get it too).
xcargo() {
  local log rc=0
  log=$(mktemp)
  PATH=/usr/bin:$PATH CARGO=/usr/bin/cargo RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 \
    CARGO_UNSTABLE_BUILD_STD=std,panic_abort "$@" >"$log" 2>&1 || rc=$?
  grep -vE '^\s+(Compiling|Checking|Downloaded|Downloading)|xcrun|SDK|DEVELOPER_DIR|^\s*\|$|^\s*= (note|help)|^warning: `munmapq[-a-z]*` \(.*\) generated 1 warning|^$' "$log" || true
  rm -f "$log"
  return $rc
}

if [ $all_targets = 1 ]; then
  # Every target of the workspace compiles for macOS without warnings, and
  # the tests link (zig as the linker); tests are built with panic=abort
  # as the profile's std is.
  for target in aarch64-apple-darwin x86_64-apple-darwin; do
    # The launcher's build script builds the library it embeds, for both
    # Apple slices: with zig as the linker (plain cargo cannot link Mach-O).
    MUNMAPQ_NESTED_CARGO=cargo-zigbuild RUSTFLAGS="-D warnings" xcargo cargo check --workspace --all-targets \
      -Zpanic-abort-tests --target "$target" --target-dir target/macos-check
    MUNMAPQ_NESTED_CARGO=cargo-zigbuild xcargo cargo-zigbuild test --workspace --all-targets --no-run \
      -Zpanic-abort-tests --target "$target" --target-dir target/macos
    echo "macos-build: $target: cargo check --workspace --all-targets and cargo test --no-run passed"
  done
  exit 0
fi

# No SIP-protected program between a macOS test and its command (dyld
# drops DYLD_* there): the integration tests test.sh runs on Darwin and the
# ci.yml macos job.
python3 scripts/check-macos-tests.py --selftest
python3 scripts/check-macos-tests.py

out=()
for target in aarch64-apple-darwin x86_64-apple-darwin universal2-apple-darwin; do
  xcargo cargo-zigbuild build --release --target "$target" \
    -p munmapq-cdylib --target-dir target/macos
  lib="target/macos/$target/release/libmunmapq.dylib"
  [ -f "$lib" ] || { echo "macos-build: $lib was not built"; exit 1; }
  out+=("$lib")
done
# The launcher for Apple Silicon, with the library build.rs embeds in it.
MUNMAPQ_NESTED_CARGO=cargo-zigbuild xcargo cargo-zigbuild build --release \
  --target aarch64-apple-darwin -p munmapq --target-dir target/macos
embedded=$(ls -t target/macos/aarch64-apple-darwin/release/build/munmapq-*/out/libmunmapq.dylib | head -1)
python3 scripts/inspect_macho.py --selftest
python3 scripts/inspect_macho.py interpose/src "${out[@]:0:2}"
python3 scripts/inspect_macho.py --archs arm64,x86_64 interpose/src "${out[2]}" "$embedded"
# The launcher's __RESTRICT rule (dyld's isRestricted) on real linker
# output: the launcher as built, a copy with the section added, the
# universal library; our reading must match LIEF's, slice by slice.
fixtures="$PWD/target/macos/restrict-fixtures"
python3 scripts/inspect_macho.py --restrict-fixtures "$fixtures" \
  target/macos/aarch64-apple-darwin/release/munmapq "${out[2]}"
if ! log=$(MUNMAPQ_MACHO_FIXTURES="$fixtures" cargo test -q -p munmapq --bins \
  macho::tests::agrees_with_lief -- --ignored --exact --nocapture 2>&1); then
  echo "$log"
  echo "macos-build: the launcher's __RESTRICT reading disagrees with LIEF's"
  exit 1
fi
echo "macho: launcher's __RESTRICT reading: $(echo "$log" | grep -o 'agrees with LIEF.*')"
