#!/usr/bin/env bash
# Builds munmapq for arm64 Linux (aarch64-unknown-linux-gnu) on an x86_64
# Debian/Ubuntu machine: the library, the launcher (with the library it
# embeds), the probe programs and every test, optimised (--release: under
# emulation an unoptimised library is too slow for the tests whose signals
# must land outside it), into target/arm64. Then lays
# out what scripts/arm64-test.sh runs them with under qemu-user:
# target/arm64/sysroot (the arm64 C library, and the libraries of Debian's
# arm64 git) and target/arm64/git (that git).
#
# Installs what is missing (as root, or through sudo when it needs no
# password): Debian's gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and
# qemu-user-static; the Rust standard library for the target (rustup
# target add; without rustup, Debian's rustc-web and rust-web-src build it
# from source with -Zbuild-std, as scripts/macos-build.sh does). Debian's
# git for arm64 is fetched with apt-get download from a package list of its
# own under target/arm64/apt (the system's dpkg architectures and package
# lists are left alone) and unpacked, never installed.
set -euo pipefail
cd "$(dirname "$0")/.."
T=aarch64-unknown-linux-gnu
out=target/arm64

if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo -n); fi
need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
[ -e /usr/aarch64-linux-gnu/lib/libc.so.6 ] && [ -e /usr/aarch64-linux-gnu/lib/libc.so ] ||
  need+=(libc6-dev-arm64-cross)
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
command -v dpkg-deb >/dev/null || need+=(dpkg)
std_from_source=0
if ! command -v rustup >/dev/null || ! rustup target add "$T" >/dev/null 2>&1; then
  # No prebuilt standard library for the target: build it from source.
  std_from_source=1
  [ -x /usr/bin/cargo ] && [ -d /usr/lib/rustlib/src/rust/library ] || need+=(rustc-web cargo-web rust-web-src)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "arm64-build: installing ${need[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Debian's git for arm64 and the libraries it links, unpacked.
if [ ! -x $out/git/usr/bin/git ]; then
  apt=$PWD/$out/apt
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs"
  touch "$apt/status"
  opts=(-o APT::Architecture=arm64 -o APT::Architectures=arm64
    -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o Dir::State::status="$apt/status"
    -o Debug::NoLocking=1)
  apt-get "${opts[@]}" update -qq
  (cd "$apt/debs" && rm -f ./*.deb && apt-get "${opts[@]}" download -qq git zlib1g libpcre2-8-0 libexpat1 2>&1 |
    grep -v "unsandboxed" || true)
  rm -rf $out/git.tmp
  for deb in "$apt"/debs/*.deb; do dpkg-deb -x "$deb" $out/git.tmp; done
  rm -rf $out/git && mv $out/git.tmp $out/git
fi
# qemu's library prefix (QEMU_LD_PREFIX): the cross C library (symlinked)
# and git's libraries.
sysroot=$out/sysroot
if [ ! -e $sysroot/lib/ld-linux-aarch64.so.1 ]; then
  rm -rf $sysroot && mkdir -p $sysroot
  cp -as /usr/aarch64-linux-gnu/lib $sysroot/lib
  cp -a $out/git/lib/aarch64-linux-gnu/. $sysroot/lib/
  cp -a $out/git/usr/lib/aarch64-linux-gnu/. $sysroot/lib/
fi

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64-static -L $PWD/$sysroot"
cargo=(cargo)
if [ $std_from_source = 1 ]; then
  # Nested cargos (the launcher's build script) inherit the environment.
  export RUSTC_BOOTSTRAP=1 CARGO_UNSTABLE_BUILD_STD=std,panic_abort
  export PATH=/usr/bin:$PATH CARGO=/usr/bin/cargo RUSTC=/usr/bin/rustc
  cargo=(/usr/bin/cargo)
  flags=(-Zpanic-abort-tests)
else
  flags=()
fi
# Warnings are errors: the aarch64 code paths compile clean.
RUSTFLAGS="-D warnings" nice "${cargo[@]}" build -q --release --workspace --all-targets "${flags[@]}" \
  --target $T --target-dir $out
# And clippy's lints on the aarch64 code paths (x86_64's are .ci/run's).
nice "${cargo[@]}" clippy -q --workspace --all-targets "${flags[@]}" --target $T --target-dir $out -- -D warnings
for f in libmunmapq.so munmapq mq-probe; do
  # e_machine (bytes 18-19): 0xb7, EM_AARCH64.
  [ "$(od -An -tx1 -j18 -N2 $out/$T/release/$f | tr -d ' ')" = b700 ] || {
    echo "arm64-build: $out/$T/release/$f is not an arm64 ELF"
    exit 1
  }
done
echo "arm64-build: library, launcher, probes and tests built for $T in $out/$T/release"
