#!/usr/bin/env bash
# Benchmarks (not tests): builds in release mode and runs mq-bench, which
# prints medians, ratios next to their bounds, peak RSS and syscall counts.
#   scripts/bench.sh                    # generated repository, 7 rounds
#   scripts/bench.sh --repo PATH        # any repository (e.g. linux.git)
#   scripts/bench.sh --rounds 3 --commits 1000
set -euo pipefail
cd "$(dirname "$0")/.."
command -v strace >/dev/null || echo "note: strace not found, syscall counts will read 0" >&2
cargo build --release --workspace
exec target/release/mq-bench "$@"
