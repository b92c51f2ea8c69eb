#!/usr/bin/env bash
# Proof that munmapq installs the two ways a newcomer would, with nothing
# but cargo: from the published crates and from the git repository.
#
# (Target directories start empty: cargo takes registry and git sources of
# the same version for unchanged, so a kept one would test stale code.)
#
# 1. `cargo package` every published crate of the workspace (the probes and
#    the workspace's own cdylib package are not), put the .crate files into a local registry on disk
#    (scripts/local-registry.py; the dependencies' .crate files come from
#    cargo's download cache) that replaces crates.io in a fresh CARGO_HOME,
#    and `cargo install munmapq` from it into a fresh --root. Our crates
#    need not be published for this to pass, and nothing is fetched.
# 2. `cargo install --git file://THIS-REPO --rev HEAD` into another fresh
#    --root (the committed state: commit first when trying local changes).
#
# Each installed binary then runs, from a directory outside the checkout,
# through tests/install.rs (MUNMAPQ_INSTALLED_BIN): git with --stats
# showing reuse, `shell-init` evaluated by bash, exit statuses, errors.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
cargo=${CARGO:-cargo}
work=${MUNMAPQ_INSTALL_TEST_DIR:-$repo/target/install-proof}
rm -rf "$work/registry" "$work/cargo-home" "$work/target-registry" "$work/target-git" "$work/root-registry" "$work/root-git" "$work/package"
mkdir -p "$work"

echo "install-test: cargo package"
"$cargo" fetch --locked --quiet
"$cargo" package --workspace --exclude munmapq-probes --exclude munmapq-cdylib --no-verify --allow-dirty --quiet \
  --target-dir "$work/package" 2>&1 | grep -v "^warning: ignoring test" || true
python3 scripts/local-registry.py "$work/registry" "$work/package/package" munmapq >/dev/null
ls "$work/registry"/*.crate | sed 's|.*/|install-test: in the local registry: |'

mkdir -p "$work/cargo-home"
cat >"$work/cargo-home/config.toml" <<EOF
[source.crates-io]
replace-with = "local-disk"
[source.local-disk]
local-registry = "$work/registry"
EOF

echo "install-test: cargo install munmapq (from the local registry)"
CARGO_HOME="$work/cargo-home" CARGO_TARGET_DIR="$work/target-registry" \
  "$cargo" install --quiet munmapq --root "$work/root-registry"

echo "install-test: cargo install --git file://$repo"
CARGO_TARGET_DIR="$work/target-git" \
  "$cargo" install --quiet --git "file://$repo" --rev "$(git rev-parse HEAD)" munmapq \
  --root "$work/root-git"

for root in "$work/root-registry" "$work/root-git"; do
  echo "install-test: running $root/bin/munmapq"
  MUNMAPQ_INSTALLED_BIN="$root/bin/munmapq" \
    "$cargo" test --quiet -p munmapq --test install -- --nocapture
done
echo "install-test: both installs work"
