#!/usr/bin/env bash
# Builds everything the integration tests run (the launcher, libmunmapq,
# the probe programs), then runs every test. Extra arguments go to cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(uname -s)" = Darwin ]; then
  # The probes and the integration tests use Linux-only calls (mremap,
  # O_PATH, /proc, strace); on macOS: the core, the launcher and the dylib.
  cargo build -p munmapq -p munmapq-interpose
  cargo test -p munmapq "$@"
  exit
fi
cargo build --workspace --all-targets
# --nocapture: the integration tests print what they covered.
cargo test --workspace "$@" -- --nocapture
