#!/usr/bin/env bash
# Benchmarks (not tests): builds in release mode and runs mq-bench, which
# prints medians, ratios next to their bounds, peak RSS and syscall counts.
#   scripts/bench.sh                    # generated repository, 7 rounds
#   scripts/bench.sh --repo PATH        # any repository (e.g. linux.git)
#   scripts/bench.sh --rounds 3 --commits 1000
#   scripts/bench.sh --load-only        # load cost next to libeatmydata, anonymous cycling
set -euo pipefail
cd "$(dirname "$0")/.."
command -v strace >/dev/null || echo "note: strace not found, syscall counts will read 0" >&2
# libeatmydata: the reference for what loading a small library costs.
if ! ls /usr/lib/*/libeatmydata.so /usr/lib/libeatmydata.so >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then sudo=(); elif sudo -n true 2>/dev/null; then sudo=(sudo -n); else sudo=(false); fi
  { "${sudo[@]}" apt-get install -y -qq eatmydata >/dev/null 2>&1 ||
    { "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq eatmydata >/dev/null; }; } ||
    echo "note: libeatmydata not found (apt-get install eatmydata); the load-cost comparison is skipped" >&2
fi
cargo build --release --workspace
exec target/release/mq-bench "$@"
