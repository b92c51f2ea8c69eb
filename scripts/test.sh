#!/usr/bin/env bash
# The README's test command. Installs what the tests need when it is
# missing (git, strace, valgrind, GNU time, sqlite3, ripgrep, zsh, fish: Debian/Ubuntu packages; as root,
# or through sudo when it needs no password; otherwise it prints the exact
# command and stops), builds everything the integration tests run (the
# launcher, libmunmapq, the probe programs), then runs every test. Extra
# arguments go to cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(uname -s)" = Darwin ]; then
  # On macOS: the unit tests, and the integration tests that do not need
  # strace, /proc or ELF programs: selftest, invariants, random, git (with
  # Homebrew's git; /usr/bin/git drops DYLD_*).
  cargo build --workspace --all-targets
  cargo test -p munmapq-core -p munmapq --bins --test selftest --test invariants --test random --test git "$@" -- --nocapture
  exit
fi

missing=()
for tool in git:git strace:strace valgrind:valgrind /usr/bin/time:time sqlite3:sqlite3 rg:ripgrep cc:gcc zsh:zsh fish:fish; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  install=(apt-get install -y -qq "${missing[@]}")
  if [ "$(id -u)" = 0 ]; then sudo=(); elif sudo -n true 2>/dev/null; then sudo=(sudo -n); else
    echo "scripts/test.sh: the tests need ${missing[*]}; install them and run me again:" >&2
    echo "  sudo apt-get update && sudo ${install[*]}" >&2
    exit 1
  fi
  command -v apt-get >/dev/null 2>&1 || {
    echo "scripts/test.sh: the tests need ${missing[*]} (no apt-get here: install them with your package manager)" >&2
    exit 1
  }
  echo "scripts/test.sh: installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" "${install[@]}" >/dev/null
fi

cargo build --workspace --all-targets
# --nocapture: the integration tests print what they covered.
cargo test --workspace "$@" -- --nocapture
