#!/usr/bin/env bash
# "Never slower than without": every workload of the set side by side with
# and without the library (and with the library of OLD_REV), exact counts
# beside the CPU ratios (not a test: it prints markdown).
#
#   scripts/bench-loose.sh [OLD_REV] [--rounds N] [--quick] [--only PART]...
#
# The set is scripts/bench-compare.sh's (see its header for what each
# measures and how): loose objects (`git log --stat -n 1500`, `git blame`,
# `git prune`, on a generated repository of ~100k loose objects, rebuilt
# here on first use in about a minute), the 64-window micro-benchmark, tiny
# pack windows, the seed's 64m/128m and default-window cases, and a
# program that maps nothing. OLD_REV defaults to the main branch's tip.
# Bounds: CPU with / without <= 1.02 everywhere; where the library gains,
# the gains stay (micro <= 0.08, tiny windows and the seed's 64m/128m <=
# 0.87). On a shared machine CPU ratios swing by several percent: the
# system calls (strace -f -c), page faults, instructions (callgrind) and
# the library's counters printed beside them are exact.
set -euo pipefail
cd "$(dirname "$0")/.."
old=main
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  old=$1
  shift
fi
only=()
for a in "$@"; do [ "$a" = --only ] && only=(x); done
if [ ${#only[@]} -eq 0 ]; then
  set -- "$@" --only loose --only nothing --only micro --only git --only seed
fi
exec scripts/bench-compare.sh "$old" "$@"
