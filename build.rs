//! Builds libmunmapq (the `interpose/` crate) with a nested cargo and puts
//! it into the launcher, so that `cargo install --path .`, which installs
//! only binaries, still gives a working `munmapq`: the launcher writes the
//! embedded library to a private cache directory when it needs it.
//!
//! The nested build sets MUNMAPQ_NESTED_BUILD, because it builds this
//! package's library (the core) again, which runs this script again. If the
//! nested build fails, the launcher is built without an embedded library and
//! finds one next to itself, as a development build does.
//!
//! For macOS the embedded library is universal (arm64 + x86_64): dyld kills
//! a program whose inserted library has no slice of its architecture
//! (Intel programs under Rosetta). Both slices are built and joined with
//! [`universal`] (what `lipo -create` does). `MUNMAPQ_NESTED_CARGO` names
//! another cargo for the nested builds (the cross-build uses cargo-zigbuild).

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
    println!("cargo:rerun-if-env-changed=MUNMAPQ_NESTED_CARGO");
    let build_dir = out.join("lib-build");
    let build = |target: &str| -> Option<Vec<u8>> {
        let cargo = std::env::var("MUNMAPQ_NESTED_CARGO")
            .or_else(|_| std::env::var("CARGO"))
            .unwrap_or_else(|_| "cargo".into());
        let mut cargo = Command::new(cargo);
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
            cargo.args(["--target", target]);
            built.push(target);
        }
        built.push(if release { "release" } else { "debug" });
        built.push(name);
        let ok = cargo.status().map(|s| s.success()).unwrap_or(false);
        ok.then(|| std::fs::read(&built).ok()).flatten()
    };
    let Some(mut lib) = build(&target) else {
        println!("cargo:warning=could not build {name} to embed; munmapq will look for it next to itself");
        return;
    };
    let other = match target.as_str() {
        "aarch64-apple-darwin" => Some("x86_64-apple-darwin"),
        "x86_64-apple-darwin" => Some("aarch64-apple-darwin"),
        _ => None,
    };
    if let Some(other) = other {
        match build(other).and_then(|o| universal(&[&lib, &o])) {
            Some(fat) => lib = fat,
            None => println!(
                "cargo:warning=the embedded {name} has only {target}'s slice (for both: rustup target add {other}); dyld kills programs of the other architecture, so munmapq runs those without it"
            ),
        }
    }
    if std::fs::write(out.join(name), lib).is_ok() {
        println!("cargo:rustc-cfg=munmapq_embedded");
    }
}

/// A universal Mach-O file of thin 64-bit ones, as `lipo -create` makes it:
/// a big-endian `fat_header` and one `fat_arch` per slice, each slice
/// aligned to 2^14 (xnu EXTERNAL_HEADERS/mach-o/fat.h). None if a part is
/// not a thin 64-bit little-endian Mach-O file.
fn universal(thin: &[&[u8]]) -> Option<Vec<u8>> {
    const ALIGN: usize = 1 << 14;
    let word = |d: &[u8], at: usize| Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?));
    let mut fat = Vec::new();
    fat.extend_from_slice(&0xcafe_babe_u32.to_be_bytes());
    fat.extend_from_slice(&(thin.len() as u32).to_be_bytes());
    let mut offset = ALIGN;
    for t in thin {
        if word(t, 0)? != 0xfeed_facf {
            return None;
        }
        for w in [word(t, 4)?, word(t, 8)?, offset as u32, t.len() as u32, 14] {
            fat.extend_from_slice(&w.to_be_bytes());
        }
        offset += t.len().div_ceil(ALIGN) * ALIGN;
    }
    for t in thin {
        fat.resize(fat.len().div_ceil(ALIGN) * ALIGN, 0);
        fat.extend_from_slice(t);
    }
    Some(fat)
}
