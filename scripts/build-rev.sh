# shellcheck shell=bash
# Sourced by the benchmark scripts that compare library versions.
# build_rev REV DIR: the release libmunmapq of git revision REV, built in its
# own tree under DIR (DIR/src, DIR/target), copied to DIR/libmunmapq.so.
build_rev() {
  local rev=$1 dir=$2
  rm -rf "$dir/src"
  mkdir -p "$dir/src"
  git archive "$rev" | tar -x -C "$dir/src"
  (cd "$dir/src" && cargo build --release --quiet -p munmapq-cdylib --target-dir "$PWD/../target")
  cp "$dir/target/release/libmunmapq.so" "$dir/libmunmapq.so"
}
