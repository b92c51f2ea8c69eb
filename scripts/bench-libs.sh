#!/usr/bin/env bash
# The micro-benchmark for two versions of the library side by side (not a
# test): what a change costs per map/unmap cycle.
#
#   scripts/bench-libs.sh OLD_REV [NEW_REV] [ROUNDS]
#
# Builds the release libmunmapq of both revisions (NEW_REV defaults to the
# working tree) and of this tree's probe, then runs `mq-probe cycle` (one
# process maps, reads and unmaps 64 distinct 16 KiB windows of one file in
# turn, 200,000 times) with no preload and with each library, alternating,
# ROUNDS times (default 21): median CPU and wall, and the ratio new/old.
# Time ratios on a shared machine swing; the exact counts printed beside
# them do not: instructions (callgrind, 20,000 cycles, user space of the
# whole process) and system calls (strace -c, 20,000 cycles).
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: scripts/bench-libs.sh OLD_REV [NEW_REV] [ROUNDS]}
new=${2:-}
rounds=${3:-21}
work=target/bench-libs
mkdir -p "$work"

# shellcheck source=scripts/build-rev.sh
. scripts/build-rev.sh

build_rev "$old" "$work/old"
if [ -n "$new" ]; then
  build_rev "$new" "$work/new"
  newlib=$work/new/libmunmapq.so
else
  cargo build --release --quiet -p munmapq-cdylib
  cp target/release/libmunmapq.so "$work/new-libmunmapq.so"
  newlib=$work/new-libmunmapq.so
  new="working tree"
fi
cargo build --release --quiet -p munmapq-probes --bin mq-probe
probe=target/release/mq-probe
file=$work/micro.bin
page=$(getconf PAGESIZE)
"$probe" mkfile "$file" $((64 * 16384 / page + 1)) >/dev/null
export MQ_WINDOW_PAGES=$((16384 / page))

run() { # PRELOAD CYCLES: the CPU and wall seconds of one run (getrusage)
  python3 - "$1" "$2" "$probe" "$file" <<'PY'
import os, resource, subprocess, sys, time
lib, cycles, probe, f = sys.argv[1:5]
env = dict(os.environ)
if lib:
    env["LD_PRELOAD"] = lib
before = resource.getrusage(resource.RUSAGE_CHILDREN)
t = time.monotonic()
subprocess.run([probe, "cycle", f, cycles, "64"], env=env, stdout=subprocess.DEVNULL, check=True)
wall = time.monotonic() - t
after = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(f"{cpu:.4f} {wall:.4f}")
PY
}

declare -A cpu wall
names=(none old new)
for ((r = 0; r < rounds; r++)); do
  for k in 0 1 2; do
    i=$(((k + r) % 3))
    case ${names[$i]} in
      none) lib="" ;;
      old) lib=$PWD/$work/old/libmunmapq.so ;;
      new) lib=$PWD/$newlib ;;
    esac
    read -r c w < <(run "$lib" 200000)
    cpu[${names[$i]}]+="$c "
    wall[${names[$i]}]+="$w "
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

count_instructions() { # PRELOAD: user-space instructions of 20,000 cycles
  local out=$work/callgrind.out
  env ${1:+LD_PRELOAD=$1} valgrind --tool=callgrind --callgrind-out-file="$out" \
    "$probe" cycle "$file" 20000 64 >/dev/null 2>"$work/callgrind.err" || true
  grep -m1 -E '^(summary|totals):' "$out" | awk '{print $2}'
}
count_syscalls() { # PRELOAD: system calls of 20,000 cycles
  strace -f -c -o "$work/strace.out" env ${1:+LD_PRELOAD=$1} "$probe" cycle "$file" 20000 64 >/dev/null
  awk '$NF == "total" {print $4}' "$work/strace.out"
}

echo "# micro-benchmark, $rounds rounds alternating: old = $old, new = $new"
echo "| library | median CPU s | median wall s | instructions / cycle (callgrind) | syscalls (20,000 cycles) |"
echo "| --- | --- | --- | --- | --- |"
for n in none old new; do
  case $n in
    none) lib="" ;;
    old) lib=$PWD/$work/old/libmunmapq.so ;;
    new) lib=$PWD/$newlib ;;
  esac
  c=$(echo "${cpu[$n]}" | median)
  w=$(echo "${wall[$n]}" | median)
  ins=$(count_instructions "$lib")
  sys=$(count_syscalls "$lib")
  eval "cpu_$n=$c; ins_$n=$ins"
  echo "| $n | $c | $w | $(awk -v i="$ins" 'BEGIN {printf "%.0f", i / 20000}') | $sys |"
done
awk -v o="$cpu_old" -v n="$cpu_new" -v z="$cpu_none" -v io="$ins_old" -v in_="$ins_new" 'BEGIN {
  printf "\nCPU new/old %.3f; new/no preload %.3f, old/no preload %.3f; instructions new/old %.4f (%+.0f per cycle)\n",
    n / o, n / z, o / z, in_ / io, (in_ - io) / 20000 }'
