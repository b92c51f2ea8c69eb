//! Builds libmunmapq (the `interpose/` crate) with a nested cargo and puts
//! it into the launcher, so that `cargo install --path .`, which installs
//! only binaries, still gives a working `munmapq`: the launcher writes the
//! embedded library to a private cache directory when it needs it.
//!
//! The nested build sets MUNMAPQ_NESTED_BUILD, because it builds this
//! package's library (the core) again, which runs this script again. If the
//! nested build fails, the launcher is built without an embedded library and
//! finds one next to itself, as a development build does.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(munmapq_embedded)");
    println!("cargo:rerun-if-env-changed=MUNMAPQ_NESTED_BUILD");
    if std::env::var_os("MUNMAPQ_NESTED_BUILD").is_some() {
        return;
    }
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    for watched in [
        "interpose/src",
        "interpose/Cargo.toml",
        "core/src",
        "core/Cargo.toml",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            manifest.join(watched).display()
        );
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let target = std::env::var("TARGET").unwrap();
    let host = std::env::var("HOST").unwrap();
    let release = std::env::var("PROFILE").unwrap() == "release";
    let name = if target.contains("apple") {
        "libmunmapq.dylib"
    } else {
        "libmunmapq.so"
    };
    let build_dir = out.join("lib-build");
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .args(["build", "-p", "munmapq-interpose", "--manifest-path"])
        .arg(manifest.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&build_dir)
        .env("MUNMAPQ_NESTED_BUILD", "1")
        .env_remove("CARGO_TARGET_DIR");
    if release {
        cargo.arg("--release");
    }
    let mut built = build_dir.clone();
    if target != host {
        cargo.args(["--target", &target]);
        built.push(&target);
    }
    built.push(if release { "release" } else { "debug" });
    built.push(name);
    let ok = cargo.status().map(|s| s.success()).unwrap_or(false);
    if ok && std::fs::copy(&built, out.join(name)).is_ok() {
        println!("cargo:rustc-cfg=munmapq_embedded");
    } else {
        println!("cargo:warning=could not build {name} to embed; munmapq will look for it next to itself");
    }
}
