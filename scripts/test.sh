#!/usr/bin/env bash
# Builds everything the integration tests run (the launcher, libmunmapq,
# the probe programs), then runs every test. Extra arguments go to cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --workspace --all-targets
cargo test --workspace "$@"
