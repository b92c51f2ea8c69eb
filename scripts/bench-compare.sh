#!/usr/bin/env bash
# Two versions of the library side by side on the micro-benchmark and on git,
# with exact counts next to the timings (not a test: it prints markdown).
#
#   scripts/bench-compare.sh OLD_REV [NEW_REV] [--rounds N] [--only micro|git|seed|loose|nothing]...
#                            [--quick] [--git-repo PATH] [--seed-repo PATH]
#
# Builds the release libmunmapq of OLD_REV in its own tree (git archive), of
# NEW_REV the same way or, without it, of the working tree, and this tree's
# mq-probe; then scripts/bench-compare.py measures, workload by workload:
#
#   1. micro, reuse path: `mq-probe cycle FILE 200000 64` (one process maps,
#      reads and unmaps 64 distinct 16 KiB windows in turn: every cycle after
#      the first 64 is a reuse);
#   2. micro, miss path: the same under MUNMAPQ_MAX_ENTRIES=1 (one queued
#      mapping, the next window never matches it: every mmap is a miss; the
#      library's counters are printed and checked to say so);
#   3. long reuse distance: `git log --raw` under mq-bench's tiny windows
#      (-c core.packedGitWindowSize=16k -c core.packedGitLimit=32k) on
#      mq-bench --eviction's repository of 20000 commits x 8000 files, and
#      git's default windows without the library as the floor;
#   4. the seed's case: `git -c core.packedGitLimit=128m log --raw` and
#      `git -c core.packedGitWindowSize=64m -c core.packedGitLimit=128m log
#      --raw` on mq-bench's 1100 MiB-pack repository, git's default config as
#      the reference;
#   5. loose objects (scripts/bench_loose.py): `git log --stat -n 1500`,
#      `git blame` of the file with the longest history and `git prune
#      --dry-run --expire=now` (gc's reachability walk) on a generated
#      repository of about 100k loose objects and no pack, git's defaults;
#      user-space instructions (callgrind) of `git log --stat -n 200`;
#   6. a program that maps nothing: `ls -l /usr/bin`.
#
# Each workload runs without preload, with the old and with the new library
# (and the floor or reference), alternating, 2 x N rounds (N = --rounds,
# default 9; raised after the first round, up to 40, until a half holds 4 s
# of CPU of the longest configuration): CPU (user+sys of the child,
# getrusage) is shown as two medians, one of each half of the rounds; a CPU
# ratio is paired, the median of the rounds' ratios (a round runs every
# configuration back to back, so the machine's drift cancels in it), the
# worse of the two halves';
# then the median wall, the peak RSS (largest ru_maxrss), the page faults of
# one run (minflt+majflt), the system calls of one run (strace -f -c), the
# library's counters (MUNMAPQ_STATS_FILE), and for the micro-benchmarks the
# exact instructions (callgrind, user space), syscalls and faults per reuse or
# per miss: the difference between 64 and 20,064 cycles, over 20,000. Ratios
# (new/no preload, old/no preload, new/old, new/floor) are printed next to
# the project's targets, each marked met or not met. Every run's output must
# be byte-identical across runs and configurations (sha256), or it stops.
#
# --only runs a subset (repeatable); --quick is for checking the script: one
# round per half and 20,000 micro cycles. The repositories are looked for in
# target/release/bench of this tree, then of the main worktree (where mq-bench
# generates them), else generated here as mq-bench does (20000 x 8000: ~15 s;
# the seed's: a 1.1 GiB pack; the loose one: ~1 min); --git-repo and
# --seed-repo name others. Needs
# python3, git, strace and valgrind. Scratch files: target/bench-compare.
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '5,6s/^# \{0,3\}//p' "$0" >&2; exit 2; }

pos=() opts=()
while [ $# -gt 0 ]; do
  case $1 in
    --rounds | --only | --git-repo | --seed-repo)
      [ $# -ge 2 ] || usage
      opts+=("$1" "$2")
      shift 2
      ;;
    --quick) opts+=("$1") && shift ;;
    -h | --help | -*) usage ;;
    *) pos+=("$1") && shift ;;
  esac
done
if [ ${#pos[@]} -lt 1 ] || [ ${#pos[@]} -gt 2 ]; then usage; fi
old=${pos[0]} new=${pos[1]:-}
work=$PWD/target/bench-compare
mkdir -p "$work"

# shellcheck source=scripts/build-rev.sh
. scripts/build-rev.sh

echo "building the old library ($old)..." >&2
build_rev "$old" "$work/old"
if [ -n "$new" ]; then
  echo "building the new library ($new)..." >&2
  build_rev "$new" "$work/new"
  new_name="$new ($(git rev-parse --short "$new"))"
else
  echo "building the new library (working tree)..." >&2
  cargo build --release --quiet -p munmapq-cdylib
  mkdir -p "$work/new"
  cp target/release/libmunmapq.so "$work/new/libmunmapq.so"
  new_name="working tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ', modified'))"
fi
cargo build --release --quiet -p munmapq-probes --bin mq-probe

exec python3 scripts/bench-compare.py --old-lib "$work/old/libmunmapq.so" --new-lib "$work/new/libmunmapq.so" \
  --old-name "$old ($(git rev-parse --short "$old"))" --new-name "$new_name" \
  --probe "$PWD/target/release/mq-probe" --work "$work" ${opts[@]+"${opts[@]}"}
