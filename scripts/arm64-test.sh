#!/usr/bin/env bash
# Runs munmapq for arm64 Linux under qemu-user, after scripts/arm64-build.sh:
# the arm64 library preloaded into arm64 programs (the probes, the C test
# programs built by the cross compiler, Debian's arm64 git). Fails on any
# difference.
#   1. `munmapq selftest`;
#   2. the library's integration tests that run only arm64 programs and need
#      neither strace nor what qemu-user does not emulate (listed below),
#      with the differential invariant checks and 300 random seeds;
#   3. git log --raw on a generated repository whose pack is several 64 MiB
#      windows long, with tiny windows (16k under 32k) and with the seed's
#      setting (64m under 128m): byte-identical output with and without
#      munmapq, windows reused and munmaps deferred (from --stats=json);
#   4. selftest with 16 KiB pages; selftest, the invariants, 40 random
#      seeds and git again with 64 KiB pages
#      (QEMU_PAGESIZE: the page size the program is told and the alignment
#      of the addresses qemu hands out; qemu does not refuse a 4 KiB-aligned
#      offset as a 64 KiB-page kernel would).
# qemu-user shows the host's kernel through its own emulation: not the real
# page size of an arm64 machine, not real timing, /proc as qemu presents it
# (no ptrace for arm64 programs: an arm64 strace cannot run, and the host's
# strace, where a test counts system calls, sees qemu's own).
set -euo pipefail
cd "$(dirname "$0")/.."
T=aarch64-unknown-linux-gnu
A=$PWD/target/arm64
R=$A/$T/release
started=$SECONDS
[ -x "$R/munmapq" ] && [ -x "$A/git/usr/bin/git" ] || {
  echo "arm64-test: run scripts/arm64-build.sh first" >&2
  exit 1
}
step() { echo "arm64-test: $* ($((SECONDS - started)) s)"; }
fail() {
  echo "arm64-test: FAILED: $*" >&2
  exit 1
}

# arm64 programs started by arm64 programs (the launcher starts git, the
# tests start the probes) run under qemu too: binfmt_misc, with the static
# qemu (a dynamic one would have the host's loader read LD_PRELOAD).
binfmt=/proc/sys/fs/binfmt_misc
[ -e $binfmt/register ] || mount -t binfmt_misc binfmt_misc $binfmt
if [ ! -e $binfmt/qemu-aarch64 ]; then
  magic='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
  mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
  echo ":qemu-aarch64:M::$magic:$mask:$(command -v qemu-aarch64-static):F" >$binfmt/register
fi
grep -q enabled $binfmt/qemu-aarch64 || fail "binfmt_misc's qemu-aarch64 is disabled"

# git (Debian's, for arm64) first on PATH, the cross compiler for the
# tests' C programs; qemu finds the arm64 C library and git's under
# QEMU_LD_PREFIX, which every arm64 process passes on.
mkdir -p "$A/bin"
ln -sf ../git/usr/bin/git "$A/bin/git"
export PATH=$A/bin:$PATH QEMU_LD_PREFIX=$A/sysroot MUNMAPQ_TEST_CC=aarch64-linux-gnu-gcc
# As arm64-build.sh built them (no rebuild).
export RUSTFLAGS="-D warnings"
export GIT_EXEC_PATH=$A/git/usr/lib/git-core GIT_TEMPLATE_DIR=$A/git/usr/share/git-core/templates
export MUNMAPQ_TEST_QEMU=1
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64-static -L $A/sysroot"
[ "$(git --version)" != "" ] && [ "$(od -An -tx1 -j18 -N2 "$A/git/usr/bin/git" | tr -d ' ')" = b700 ] ||
  fail "the arm64 git does not run"
# The page size an arm64 program is told.
printf '#include <stdio.h>\n#include <unistd.h>\nint main(void) { printf("%%ld\\n", sysconf(_SC_PAGESIZE)); return 0; }\n' >"$A/pagesize.c"
aarch64-linux-gnu-gcc -O -o "$A/pagesize" "$A/pagesize.c"
echo "arm64-test: $(qemu-aarch64-static --version | head -1); $("$R/munmapq" --version); pages of $("$A/pagesize") bytes"

# 1. selftest.
selftest() {
  local log
  log=$("$R/munmapq" selftest 2>&1) || {
    echo "$log"
    fail "munmapq selftest ${1:-}"
  }
  echo "$log" | grep -E "^  (system|random|reuse)|PASS"
}
selftest
step "selftest passed"

# 2. The integration tests. Left out: those that need strace (fd_mode,
# stress's syscall counts) or run host programs with the library preloaded
# (cli, programs, doctor's scripts, cache's cleared PATH, install, the
# seccomp scenarios); git_seed (step 3 is its check here); and these, which
# qemu-user cannot show: selftest's time limit (timing), signals' ignored
# set and git_wrapper's SigIgn, and a hangup the caller ignored surviving
# the launcher's exec of a host shell (qemu keeps signals for itself: an
# ignored signal is not handed on as ignored across its exec), selftest's
# foreign library (it looks for an arm64 libm where a Debian arm64 system
# keeps it, not where the cross sysroot does; `munmapq selftest` with the
# sysroot's libm is refused with status 1 under qemu too), headroom
# (RLIMIT_AS and vm.max_map_count apply to qemu's own mappings), the sealed
# mappings (no mseal), stress's map-count run and 1M-operation threads run
# (timing; a smaller threads run is below).
skips=(
  the_built_library_passes_in_seconds
  ignored_signals_stay_ignored_in_the_command
  a_hangup_ignored_by_the_caller_is_survived
  a_foreign_library_fails_through_munmapq_lib
  stats_sum_over_child_processes
  sealed_mappings_are_never_deferred_and_freed_ranges_cannot_be_sealed
)
skip_args=()
for s in "${skips[@]}"; do skip_args+=(--skip "$s"); done
tests=(invariants random library trace file_identity config scratch signals launcher
  last_close attacks git resident_budget selftest page_size_literals)
test_args=()
for t in "${tests[@]}"; do test_args+=(--test "$t"); done
rc=0
MUNMAPQ_RANDOM_SEEDS=300 nice cargo test -q --no-fail-fast --release --target $T --target-dir target/arm64 \
  "${test_args[@]}" -- --nocapture --test-threads=2 "${skip_args[@]}" >target/arm64/tests.log 2>&1 || rc=$?
grep -E "^\.?(invariants|random|git log --raw|trace)[:,]|^test result|^---- " target/arm64/tests.log || true
[ $rc = 0 ] && ! grep -q "^test result: FAILED" target/arm64/tests.log || fail "integration tests (target/arm64/tests.log)"
[ "$(grep -c '^test result: ok' target/arm64/tests.log)" -ge ${#tests[@]} ] || fail "not every test ran"
step "integration tests passed"

# Threads and fork, identical with and without (smaller than the tests'
# runs, which are too slow under emulation): map/verify/unmap from 4
# threads; 100 children forked while the parent's queue holds windows
# (the fork handlers), with the defaults and a one-entry queue.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$R/mq-probe" mkfile "$tmp/data" 256 >/dev/null
"$R/mq-probe" mkfile "$tmp/other" 256 >/dev/null
same() { # label env... -- command...
  local label=$1 plain with env=()
  shift
  while [ "$1" != -- ]; do env+=("$1"); shift; done
  shift
  plain=$("$@" 2>"$tmp/plain.err") || fail "$label without munmapq: $plain $(cat "$tmp/plain.err")"
  with=$(env "${env[@]}" LD_PRELOAD="$R/libmunmapq.so" MUNMAPQ_STATS=1 "$@" 2>"$tmp/stats") ||
    fail "$label with munmapq: $with $(cat "$tmp/stats")"
  [ "$plain" = "$with" ] || fail "$label: without: $plain; with: $with"
  grep -q " deferred=[1-9]" "$tmp/stats" || fail "$label: nothing deferred: $(cat "$tmp/stats")"
  echo "  $label: identical, $(grep -c "^munmapq pid=" "$tmp/stats") process(es) deferred munmaps: $(echo "$with" | tail -1)"
}
same threads -- "$R/mq-probe" threads "$tmp/data" 4 20000
for entries in "" 1; do
  same "fork${entries:+, MUNMAPQ_MAX_ENTRIES=1}" ${entries:+MUNMAPQ_MAX_ENTRIES=1} -- \
    "$R/mq-probe" last-close fork "$tmp/data" "$tmp/other" 100
done

# 3. git log --raw: a pack of ~176 MiB (700 commits adding a 256 KiB blob,
# stored uncompressed, as tests/git_seed.rs), more than the two 64 MiB
# windows the seed's setting lets git keep.
repo=$tmp/repo
git init -q -b main "$repo"
"$R/mq-probe" fast-import-big 700 300 256 |
  git -C "$repo" -c pack.compression=0 -c core.compression=0 fast-import --quiet
pack=$(du -m "$repo"/.git/objects/pack/*.pack | cut -f1)
step "generated a repository with a $pack MiB pack"
counter() { grep -o "\"$1\":[0-9]*" "$2" | cut -d: -f2; }
git_log() { # window limit label
  git -C "$repo" -c core.packedGitWindowSize="$1" -c core.packedGitLimit="$2" log --raw >"$tmp/plain"
  "$R/munmapq" --stats=json git -C "$repo" -c core.packedGitWindowSize="$1" -c core.packedGitLimit="$2" \
    log --raw >"$tmp/with" 2>"$tmp/stats.json"
  cmp -s "$tmp/plain" "$tmp/with" || fail "git log --raw with $1 windows under $2 $3: output differs"
  local reused deferred maps
  reused=$(counter reused "$tmp/stats.json")
  deferred=$(counter deferred "$tmp/stats.json")
  maps=$(counter mmap_calls "$tmp/stats.json")
  [ "${reused:-0}" -gt 0 ] && [ "${deferred:-0}" -gt 0 ] ||
    fail "git log --raw with $1 windows under $2 $3: reused ${reused:-?}, deferred ${deferred:-?} ($(cat "$tmp/stats.json"))"
  echo "  git log --raw, $1 windows under $2$3: $(wc -l <"$tmp/plain") lines identical; $maps window maps, $reused reused, $deferred munmaps deferred"
}
git_log 16k 32k ""
git_log 64m 128m ""
step "git log --raw identical, windows reused, munmaps deferred"

# 4. 16 and 64 KiB pages, as qemu can show them.
export QEMU_PAGESIZE=16384
[ "$("$A/pagesize")" = 16384 ] || fail "QEMU_PAGESIZE=16384: pages of $("$A/pagesize") bytes"
selftest "with 16 KiB pages"
export QEMU_PAGESIZE=65536
[ "$("$A/pagesize")" = 65536 ] || fail "QEMU_PAGESIZE=65536: pages of $("$A/pagesize") bytes"
selftest "with 64 KiB pages"
rc=0
MUNMAPQ_RANDOM_SEEDS=40 nice cargo test -q --no-fail-fast --release --target $T --target-dir target/arm64 \
  --test invariants --test random -- --nocapture >target/arm64/tests-64k.log 2>&1 || rc=$?
grep -E "^\.?(invariants|random)" target/arm64/tests-64k.log || true
[ $rc = 0 ] || fail "invariants and random with 64 KiB pages (target/arm64/tests-64k.log)"
git_log 16k 32k " (64 KiB pages)"
git_log 64m 128m " (64 KiB pages)"
unset QEMU_PAGESIZE
step "16 KiB pages: selftest; 64 KiB pages: selftest, invariants, random and git passed"
echo "arm64-test: 0 failed; passed in $((SECONDS - started)) s"
