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
# target/release/munmapq (built if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200}
[ -x target/release/munmapq ] || cargo build --release -q
munmapq=$PWD/target/release/munmapq
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
