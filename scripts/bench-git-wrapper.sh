#!/usr/bin/env bash
# What the git wrapper costs where it does not wrap: `git status` in a
# small repository with git's default settings, run N times each, the
# forms alternating run by run, medians printed in milliseconds:
#   git        the real git, directly
#   function   what shell-init's git function runs: munmapq __git status
#   symlink    munmapq linked as git, first in PATH (which it searches for
#              the real git, skipping itself)
#   launcher   munmapq -- git status (what the function did before: always
#              through the launcher, library preloaded)
#   true       /bin/true: what starting one process costs on this machine now
# Every form is run by its absolute path, so the shell's own PATH lookup is
# the same for all.
# Usage: scripts/bench-git-wrapper.sh [N] (default 200). Uses
# target/release/munmapq (built if missing), or $MUNMAPQ.
#
# scripts/bench-git-wrapper.sh --counts: exact counts instead of times, for
# one `git status` in each form (warm decision cache): system calls of the
# whole process tree (strace -f -c), successful execve calls, and
# instructions executed in user space (valgrind --tool=callgrind
# --trace-children=yes, summed over every image); "wrapper" lines give the
# difference to git alone. Needs strace and valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
counts=
if [ "${1:-}" = --counts ]; then counts=1; shift; fi
n=${1:-200}
# MUNMAPQ=PATH measures another build (e.g. an older revision's).
if [ -z "${MUNMAPQ:-}" ]; then
  [ -x target/release/munmapq ] || cargo build --release -q
fi
munmapq=${MUNMAPQ:-$PWD/target/release/munmapq}
git=$(command -v git)

tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME=$tmp/cache HOME=$tmp/home GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME" "$tmp/bin"
ln -s "$munmapq" "$tmp/bin/git"
repo=$tmp/repo
"$git" init -q "$repo"
for i in $(seq 1 50); do echo "file $i" > "$repo/f$i.txt"; done
"$git" -C "$repo" add . && "$git" -C "$repo" -c user.name=b -c user.email=b@b commit -qm files
# The wrapper caches its decision only for files older than a second.
sleep 1.1
cd "$repo"

forms=(git function symlink launcher true)
export PATH=$tmp/bin:$PATH
run() {
  case $1 in
    git) "$git" status ;;
    function) "$munmapq" __git status ;;
    symlink) "$tmp/bin/git" status ;;
    launcher) "$munmapq" -- "$git" status ;;
    true) /bin/true ;;
  esac >/dev/null
}
for f in "${forms[@]}"; do run "$f"; : > "$tmp/$f.times"; done   # warm up, fill the cache

if [ -n "$counts" ]; then
  # The command line of each form, as run() runs it.
  argv() {
    case $1 in
      git) echo "$git status" ;;
      function) echo "$munmapq __git status" ;;
      symlink) echo "$tmp/bin/git status" ;;
      launcher) echo "$munmapq -- $git status" ;;
      true) echo "/bin/true" ;;
    esac
  }
  count() { # FORM: syscalls execs instructions
    local f=$1 cmd
    cmd=$(argv "$f")
    strace -f -c -o "$tmp/$f.strace" $cmd >/dev/null 2>&1
    local calls
    calls=$(awk '/ total$/ { print $(NF-2) }' "$tmp/$f.strace")
    strace -f -qq -e trace=execve -o "$tmp/$f.exec" $cmd >/dev/null 2>&1
    local execs
    execs=$(grep -c 'execve(.*= 0$' "$tmp/$f.exec" || true)
    rm -f "$tmp"/cg.*
    # Each image dumps its counts before it execs (else they are lost).
    valgrind --tool=callgrind --trace-children=yes --dump-before=execve \
      --dump-before=execvp --dump-before=execv --callgrind-out-file="$tmp/cg.%p" \
      $cmd >/dev/null 2>&1
    local ir
    ir=$(cat "$tmp"/cg.* | awk '/^totals:/ { s += $2 } END { print s + 0 }')
    echo "$calls $execs $ir"
  }
  echo "git status in a small repository (50 files): exact counts for one run (whole process tree)"
  printf '  %-9s %9s %6s %14s\n' form syscalls execs instructions
  read -r bc be bi <<<"$(count git)"
  for f in "${forms[@]}"; do
    read -r c e i <<<"$(count "$f")"
    printf '  %-9s %9s %6s %14s' "$f" "$c" "$e" "$i"
    case $f in git | true) echo ;; *) printf '   wrapper: %+d syscalls, %+d execs, %+d instructions\n' $((c - bc)) $((e - be)) $((i - bi)) ;; esac
  done
  exit 0
fi
for _ in $(seq 1 "$n"); do
  for f in "${forms[@]}"; do
    t0=$EPOCHREALTIME
    run "$f"
    t1=$EPOCHREALTIME
    echo "$t0 $t1" | awk '{ printf "%.3f\n", ($2 - $1) * 1000 }' >> "$tmp/$f.times"
  done
done
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
base=$(median "$tmp/git.times")
echo "git status in a small repository (50 files), $n runs each, alternating; median ms (difference to git):"
for f in "${forms[@]}"; do
  m=$(median "$tmp/$f.times")
  printf '  %-9s %7.3f  (%+.3f)\n' "$f" "$m" "$(echo "$m $base" | awk '{ print $1 - $2 }')"
done
