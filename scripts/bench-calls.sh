#!/usr/bin/env bash
# What the library costs per call, in exact counts: user-space instructions
# (callgrind) of a program run with and without the library, at two sizes,
# so that what the load costs cancels out; the difference divided by the
# calls added is printed beside the program's own cost per cycle. Every run
# has the same environment of one variable (PATH) besides LD_PRELOAD.
#
#   scripts/bench-calls.sh [LIB]
#
# LIB defaults to the library as the launcher embeds it (link-time
# optimisation, one codegen unit; built under target/lto). Rows:
#   reuse    a descriptor kept open, 64 windows of 16 KiB mapped, read and
#            unmapped in turn (tests/c/fdmode.c cycle): per map + unmap,
#            every one a reuse after the first round
#   aside    files read as git reads loose objects (open, fstat, mmap the
#            whole file, close, read, munmap; tests/c/loose.c): per file,
#            the library passing every call through
#   window   `git log --raw -n 2000` with 16 KiB pack windows on a generated
#            repository (mq-probe fast-import 800 300): per mmap git makes
#            (the library's mmap_calls), nearly all of them window maps
# The last column counts the library's locked instructions (atomic
# read-modify-writes, scripts/callgrind_locked.py) in the same difference.
# The program's own count is user space only: without the library each of
# its mmaps and munmaps is a system call, whose kernel work callgrind does
# not see.
set -euo pipefail
cd "$(dirname "$0")/.."
work=target/bench-calls
mkdir -p "$work"
for tool in valgrind cc git; do
  command -v "$tool" >/dev/null || { echo "bench-calls: $tool is missing" >&2; exit 1; }
done
lib=${1:-}
if [ -z "$lib" ]; then
  CARGO_PROFILE_RELEASE_LTO=true CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
    cargo build --release -q -p munmapq-cdylib --target-dir target/lto
  lib=$PWD/target/lto/release/libmunmapq.so
fi
cargo build --release -q -p munmapq-probes --bin mq-probe
cc -O1 -o "$work/fdmode" tests/c/fdmode.c
cc -O1 -o "$work/loose" tests/c/loose.c

# Instructions of "$@", with LD_PRELOAD=$preload when set, and how many
# of them were the library's locked ones (0 without it).
count() {
  local out=$work/callgrind.out
  env -i PATH=/usr/bin:/bin ${preload:+LD_PRELOAD=$preload} \
    valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$out" "$@" >/dev/null 2>&1
  echo "$(sed -n 's/^totals: //p' "$out") $(
    if [ -n "$preload" ]; then scripts/callgrind_locked.py "$out" "$preload"; else echo 0; fi
  )"
}

# row NAME CALLS_SMALL CALLS_LARGE CMD_SMALL... -- CMD_LARGE...
row() {
  local name=$1 n1=$2 n2=$3
  shift 3
  local small=() large=()
  while [ "$1" != -- ]; do small+=("$1"); shift; done
  shift
  large=("$@")
  local a1 b1 a2 b2
  a1=$(preload='' count "${small[@]}"); b1=$(preload=$lib count "${small[@]}")
  a2=$(preload='' count "${large[@]}"); b2=$(preload=$lib count "${large[@]}")
  # shellcheck disable=SC2086 # each count is two words
  python3 - "$name" "$n1" "$n2" $a1 $b1 $a2 $b2 <<'PY'
import sys
name, n1, n2, a1, _, b1, l1, a2, _, b2, l2 = sys.argv[1], *map(int, sys.argv[2:])
n = n2 - n1
own = (a2 - a1) / n
lib = ((b2 - a2) - (b1 - a1)) / n
locked = (l2 - l1) / n
print(f"| {name} | {own:,.0f} | {lib:,.0f} | {locked:,.1f} |")
PY
}

head -c $((64 * 16384)) /dev/zero | tr '\0' x >"$work/windows"
mkdir -p "$work/loose-files"
for i in $(seq 0 2999); do
  [ -e "$work/loose-files/$i" ] || printf 'blob %d %0200d\n' "$i" "$i" >"$work/loose-files/$i"
done
repo=$work/repo
if [ ! -d "$repo/.git" ]; then
  git init -q -b main "$repo"
  target/release/mq-probe fast-import 800 300 | git -C "$repo" fast-import --quiet
  git -C "$repo" repack -adq
fi
tiny=(-c core.packedGitWindowSize=16k -c core.packedGitLimit=32k)
windows() {
  env -i PATH=/usr/bin:/bin LD_PRELOAD="$lib" MUNMAPQ_STATS=1 \
    git -C "$repo" "${tiny[@]}" log --raw -n "$1" 2>&1 >/dev/null |
    sed -n 's/.* mmap_calls=\([0-9]*\) .*/\1/p'
}

echo "library: $lib"
echo
echo "| per | the program's own user instructions | the library's | the library's locked |"
echo "| --- | --- | --- | --- |"
row "reuse (map + unmap)" 640 6400 "$work/fdmode" "$work/windows" cycle 10 64 -- "$work/fdmode" "$work/windows" cycle 100 64
row "aside (a loose object: open, map, close, unmap)" 1000 3000 "$work/loose" "$work/loose-files" 1000 1000000 -- "$work/loose" "$work/loose-files" 3000 1000000
w1=$(windows 200)
w2=$(windows 2000)
row "window of git log --raw, 16 KiB windows" "$w1" "$w2" git -C "$repo" "${tiny[@]}" log --raw -n 200 -- git -C "$repo" "${tiny[@]}" log --raw -n 2000
