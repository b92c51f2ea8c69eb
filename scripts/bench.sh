#!/usr/bin/env bash
# Benchmarks (not tests): builds in release mode and runs mq-bench, which
# prints medians, ratios next to their bounds, peak RSS and syscall counts.
#   scripts/bench.sh                    # generated repository, 7 rounds
#   scripts/bench.sh --repo PATH        # any repository (e.g. linux.git)
#   scripts/bench.sh --rounds 3 --commits 1000
#   scripts/bench.sh --load-only        # load cost next to libeatmydata, anonymous cycling
#   scripts/bench.sh --seed [BENCH OPTIONS]
#                                       # the seed rows as CI's macos-bench job and users
#                                       # measure them: munmapq bench --seed in
#                                       # scripts/seed-repo.py's repository (made once, in
#                                       # target/seed-repo), its figures checked
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --seed ]; then
  shift
  cargo build --release --workspace
  repo=$PWD/target/seed-repo
  [ -d "$repo/.git" ] || python3 scripts/seed-repo.py "$repo"
  # The figures are checked (and printed) whatever bench's status; then
  # the script fails with it.
  status=0
  (cd "$repo" && ../release/munmapq bench --seed --json "$@") | tee target/seed-bench.json || status=$?
  python3 scripts/check-bench-workflow.py --seed-json target/seed-bench.json
  exit "$status"
fi
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
