//! Announces where this package's sources are, as `links` metadata: the
//! `munmapq` launcher's build script reads it as `DEP_MUNMAPQ_ROOT` and
//! builds the library from there, the same way from a git checkout and from
//! a published crate.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:root={dir}");
    println!("cargo:rerun-if-changed=build.rs");
}
