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
# one `git status` in each form (warm decision cache), and for `env` in
# front of git and of /bin/true, the exec wrapper whose cost the git
# wrapper's is held to: system calls of the whole process tree (strace -f
# -c), successful execve calls, instructions executed in user space
# (valgrind --tool=callgrind --trace-children=yes, summed over every image)
# and minor page faults (GNU time's %R, the one process across its exec);
# "added" lines give the difference to git alone (env /bin/true's to
# /bin/true), and "before exec" what the wrapper's own process did before
# it exec'd git: its system calls and its instructions. Needs strace,
# valgrind and /usr/bin/time. GIT_ARGS="rev-parse HEAD" measures another
# git command.
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

forms=(git function symlink launcher env true env-true)
export PATH=$tmp/bin:$PATH
read -ra gargs <<<"${GIT_ARGS:-status}"
run() {
  case $1 in
    git) "$git" "${gargs[@]}" ;;
    function) "$munmapq" __git "${gargs[@]}" ;;
    symlink) "$tmp/bin/git" "${gargs[@]}" ;;
    launcher) "$munmapq" -- "$git" "${gargs[@]}" ;;
    env) env "$git" "${gargs[@]}" ;;
    true) /bin/true ;;
    env-true) env /bin/true ;;
  esac >/dev/null
}
for f in "${forms[@]}"; do run "$f"; : > "$tmp/$f.times"; done   # warm up, fill the cache

if [ -n "$counts" ]; then
  # The command line of each form, as run() runs it.
  argv() {
    case $1 in
      git) echo "$git ${gargs[*]}" ;;
      function) echo "$munmapq __git ${gargs[*]}" ;;
      symlink) echo "$tmp/bin/git ${gargs[*]}" ;;
      launcher) echo "$munmapq -- $git ${gargs[*]}" ;;
      env) echo "$(command -v env) $git ${gargs[*]}" ;;
      true) echo "/bin/true" ;;
      env-true) echo "$(command -v env) /bin/true" ;;
    esac
  }
  count() { # FORM: syscalls execs instructions faults syscalls-before-exec instructions-before-exec
    local f=$1 cmd
    cmd=$(argv "$f")
    strace -f -c -o "$tmp/$f.strace" $cmd >/dev/null 2>&1
    local calls
    calls=$(awk '/ total$/ { print $4 }' "$tmp/$f.strace")
    # Every call, in order: those before the second execve are the
    # wrapper's own (the first is its own start).
    strace -f -qq -o "$tmp/$f.trace" $cmd >/dev/null 2>&1
    local execs before
    execs=$(grep -c 'execve(.*= 0$' "$tmp/$f.trace" || true)
    before=$(awk '/execve\(/ { n++; if (n == 2) exit } n == 1 { c++ } END { print c - 1 }' "$tmp/$f.trace")
    rm -f "$tmp"/cg.*
    # Each image dumps its counts before it execs (else they are lost);
    # the first process's first dump is the wrapper's own part.
    valgrind --tool=callgrind --trace-children=yes --dump-before=execve \
      --dump-before=execvp --dump-before=execv --callgrind-out-file="$tmp/cg.%p" \
      $cmd >/dev/null 2>&1
    local ir first irb
    ir=$(cat "$tmp"/cg.* | awk '/^totals:/ { s += $2 } END { print s + 0 }')
    first=$(cd "$tmp" && ls cg.* | sed 's/^cg\.//; s/\..*//' | sort -n | head -1)
    irb=$(awk '/^totals:/ { print $2 }' "$tmp/cg.$first.1" 2>/dev/null || echo 0)
    local faults
    /usr/bin/time -f '%R' -o "$tmp/$f.time" $cmd >/dev/null 2>&1
    faults=$(tail -1 "$tmp/$f.time")
    echo "$calls $execs $ir $faults $before ${irb:-0}"
  }
  echo "git ${gargs[*]} in a small repository (50 files): exact counts for one run (whole process tree)"
  printf '  %-9s %9s %6s %14s %7s\n' form syscalls execs instructions faults
  read -r bc be bi bf _ <<<"$(count git)"
  read -r tc te ti tf _ <<<"$(count true)"
  for f in "${forms[@]}"; do
    read -r c e i pf sb ib <<<"$(count "$f")"
    printf '  %-9s %9s %6s %14s %7s' "$f" "$c" "$e" "$i" "$pf"
    case $f in
      git | true) echo ;;
      env-true) printf '   added: %+d syscalls, %+d instructions, %+d faults; before exec: %d syscalls, %d instructions\n' \
        $((c - tc)) $((i - ti)) $((pf - tf)) "$sb" "$ib" ;;
      *) printf '   added: %+d syscalls, %+d execs, %+d instructions, %+d faults; before exec: %d syscalls, %d instructions\n' \
        $((c - bc)) $((e - be)) $((i - bi)) $((pf - bf)) "$sb" "$ib" ;;
    esac
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
