#!/usr/bin/env bash
# What loading libmunmapq costs a process that does nothing with it, in exact
# counts (not a test; tests/load_cost.rs checks the bounds):
#
#   scripts/bench-load.sh [REV...]
#
# For /bin/true, `ls /`, `git --version` and a program that never calls
# malloc (built here), run without preload, with an empty preloaded library
# (a C file with no code, built here), with libeatmydata if it is
# installed, with the release libmunmapq of this tree (`munmapq`), with the
# same built as the launcher builds the library it embeds (`munmapq-lto`:
# link-time optimisation, one codegen unit; what `cargo install` gives), and
# with the release libmunmapq of each git revision REV (built under
# target/bench-load/REV): user-space instructions of the whole process
# (callgrind), system calls (strace -f -c) and minor page faults (wait4 of
# the child: the median of 11 runs, as address randomisation moves them by
# one or two). Each is printed as a total, then as the difference from
# the empty library.
set -euo pipefail
cd "$(dirname "$0")/.."
work=target/bench-load
mkdir -p "$work"

for tool in valgrind strace cc; do
  command -v "$tool" >/dev/null || {
    echo "bench-load: $tool is missing (apt-get install valgrind strace gcc)" >&2
    exit 1
  }
done

# shellcheck source=scripts/build-rev.sh
. scripts/build-rev.sh

: >"$work/empty.c"
cc -shared -fPIC -o "$work/libempty.so" "$work/empty.c"
cat >"$work/nomalloc.c" <<'C'
/* Returns at once: nothing in it calls malloc. */
int main(void) { return 0; }
C
cc -O2 -o "$work/nomalloc" "$work/nomalloc.c"
cat >"$work/faults.c" <<'C'
/* faults LIB CMD...: runs CMD with LIB preloaded (none if empty), its
 * output to /dev/null, and prints the child's minor page faults (wait4). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    pid_t pid = fork();
    if (pid == 0) {
        if (argv[1][0]) setenv("LD_PRELOAD", argv[1], 1);
        else unsetenv("LD_PRELOAD");
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, 1) < 0) _exit(126);
        close(null);
        execvp(argv[2], argv + 2);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid) return 1;
    printf("%ld\n", ru.ru_minflt);
    return 0;
}
C
cc -O2 -o "$work/faults" "$work/faults.c"

cargo build --release --quiet -p munmapq-cdylib
cp target/release/libmunmapq.so "$work/libmunmapq.so"
# Built as the launcher builds the library it embeds (what `cargo install`
# gives): one optimised unit.
CARGO_PROFILE_RELEASE_LTO=true CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
  cargo build --release --quiet -p munmapq-cdylib --target-dir target/lto
cp target/lto/release/libmunmapq.so "$work/libmunmapq-lto.so"

names=(none empty)
libs=("" "$PWD/$work/libempty.so")
eat=$(ls /usr/lib/*/libeatmydata.so /usr/lib/libeatmydata.so 2>/dev/null | head -1 || true)
if [ -n "$eat" ]; then
  names+=(eatmydata)
  libs+=("$eat")
fi
names+=(munmapq munmapq-lto)
libs+=("$PWD/$work/libmunmapq.so" "$PWD/$work/libmunmapq-lto.so")
for rev in "$@"; do
  build_rev "$rev" "$work/$rev"
  names+=("$rev")
  libs+=("$PWD/$work/$rev/libmunmapq.so")
done

commands=("/bin/true" "ls /" "git --version" "$work/nomalloc")

instructions() { # LIB CMD...
  local lib=$1 out=$work/callgrind.out
  shift
  LD_PRELOAD=$lib valgrind --tool=callgrind --callgrind-out-file="$out" "$@" >/dev/null 2>&1
  sed -n 's/^totals: *//p' "$out"
  rm -f "$out"
}

syscalls() { # LIB CMD...
  local lib=$1 out=$work/strace.out
  shift
  if [ -n "$lib" ]; then
    strace -f -c -o "$out" -E "LD_PRELOAD=$lib" "$@" >/dev/null
  else
    strace -f -c -o "$out" "$@" >/dev/null
  fi
  awk '$NF == "total" { print $(NF - 2) }' "$out"
  rm -f "$out"
}

faults() { # LIB CMD...: the median of 11 runs
  local i
  for i in $(seq 11); do "$work/faults" "$@" </dev/null 2>/dev/null; done | sort -n | sed -n 6p
}

declare -A count
for c in "${!commands[@]}"; do
  # shellcheck disable=SC2086 # the command's words
  set -- ${commands[$c]}
  for l in "${!names[@]}"; do
    count[i,$c,$l]=$(instructions "${libs[$l]}" "$@")
    count[s,$c,$l]=$(syscalls "${libs[$l]}" "$@")
    count[f,$c,$l]=$(faults "${libs[$l]}" "$@")
  done
done

empty=1
table() { # KIND TITLE
  local kind=$1 c l
  printf '\n%s\n\n| command |' "$2"
  for l in "${!names[@]}"; do printf ' %s |' "${names[$l]}"; done
  printf '\n| --- |'
  for l in "${!names[@]}"; do printf ' ---: |'; done
  printf '\n'
  for c in "${!commands[@]}"; do
    printf '| `%s` |' "${commands[$c]}"
    for l in "${!names[@]}"; do
      local v=${count[$kind,$c,$l]} e=${count[$kind,$c,$empty]}
      if [ "$l" -le "$empty" ]; then
        printf " %'d |" "$v"
      else
        printf " %'d (%+'d) |" "$v" "$((v - e))"
      fi
    done
    printf '\n'
  done
}

echo "libmunmapq at load, $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- interpose core || echo '+changes'); in parentheses: above the empty library"
table i "User-space instructions (callgrind, whole process)"
table s "System calls (strace -f -c)"
table f "Minor page faults (wait4, median of 11)"
