//! Builds libmunmapq from the sources of the `munmapq-interpose` package
//! with a nested cargo and puts it into the launcher, so that
//! `cargo install munmapq`, which installs only binaries, gives a working
//! tool: the launcher writes the embedded library to a private cache
//! directory when it needs it.
//!
//! Where the sources are: `munmapq-interpose` is a dependency with
//! `links = "munmapq"`; its build script announces its own directory, which
//! cargo hands to this script as `DEP_MUNMAPQ_ROOT`. That is `interpose/` in
//! a git checkout and the unpacked published crate in a registry build, so
//! both take the same path: a small package written into OUT_DIR (its own
//! workspace), a cdylib whose whole source is `extern crate
//! munmapq_interpose;` depending on that directory as a path dependency, is
//! built there (the crate holds everything the library needs). Nothing is
//! written into the source directory (a registry's may be read-only).
//!
//! The nested cargo runs `--offline`: every crate it needs is a dependency
//! of this package too, so the outer cargo has already fetched it (see
//! below for the one case where it may fetch).
//!
//! No library, no launcher: if the library cannot be built, this script
//! fails and says why.
//!
//! For macOS the embedded library is universal (arm64 + x86_64): dyld kills
//! a program whose inserted library has no slice of its architecture
//! (Intel programs under Rosetta). Both slices are built and joined with
//! [`universal`] (what `lipo -create` does). `MUNMAPQ_NESTED_CARGO` names
//! another cargo for the nested builds (the cross-build uses cargo-zigbuild).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fail(what: &str) -> ! {
    eprintln!("error: munmapq: cannot build the library the launcher embeds: {what}");
    eprintln!("error: munmapq: the launcher is never built without its library");
    std::process::exit(1);
}

fn env(name: &str) -> String {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var(name).unwrap_or_else(|_| fail(&format!("{name} is not set")))
}

/// A TOML basic string.
fn toml_str(p: &Path) -> String {
    let s = p
        .to_str()
        .unwrap_or_else(|| fail(&format!("{} is not UTF-8", p.display())));
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Writes the package that links the crate in `src` into libmunmapq.
fn wrapper(src: &Path, out: &Path) -> PathBuf {
    let dir = out.join("libmunmapq");
    let lib = dir.join("src/lib.rs");
    let lib_text = "// Written by the munmapq launcher's build script.\n\
                    #![no_std]\n\
                    extern crate munmapq_interpose;\n";
    std::fs::create_dir_all(dir.join("src"))
        .and_then(|()| std::fs::write(&lib, lib_text))
        .unwrap_or_else(|e| fail(&format!("{}: {e}", lib.display())));
    let manifest = dir.join("Cargo.toml");
    let text = format!(
        "# Written by the munmapq launcher's build script.\n\
         [package]\nname = \"libmunmapq\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\
         # interpose/cdylib_build.rs: no libiconv in the Apple dylib.\n\
         build = {}\n\n\
         [lib]\nname = \"munmapq\"\ncrate-type = [\"cdylib\"]\n\n\
         [dependencies]\nmunmapq-interpose = {{ path = {} }}\n\n\
         # The library never unwinds into the program that loaded it; in\n\
         # release it is one optimised unit (the core's helpers inline into\n\
         # the hooks).\n\
         [profile.dev]\npanic = \"abort\"\n\
         [profile.release]\npanic = \"abort\"\nlto = true\ncodegen-units = 1\n\n\
         [workspace]\n",
        toml_str(&src.join("cdylib_build.rs")),
        toml_str(src),
    );
    std::fs::write(&manifest, text)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", manifest.display())));
    manifest
}

fn main() {
    let src = PathBuf::from(env("DEP_MUNMAPQ_ROOT"));
    let out = PathBuf::from(env("OUT_DIR"));
    let target = env("TARGET");
    let host = env("HOST");
    let release = env("PROFILE") == "release";
    // A directory is watched whole (every file in it, recursively).
    println!("cargo:rerun-if-changed={}", src.display());
    // In a checkout, the core is a path dependency next to it.
    let core = src.join("../core");
    if core.join("Cargo.toml").is_file() {
        println!("cargo:rerun-if-changed={}", core.display());
    }
    let name = if target.contains("apple") {
        "libmunmapq.dylib"
    } else {
        "libmunmapq.so"
    };
    println!("cargo:rerun-if-env-changed=MUNMAPQ_NESTED_CARGO");
    let manifest = wrapper(&src, &out);
    let build_dir = out.join("lib-build");
    let nested = |target: &str, offline: bool| {
        let cargo = std::env::var("MUNMAPQ_NESTED_CARGO")
            .or_else(|_| std::env::var("CARGO"))
            .unwrap_or_else(|_| "cargo".into());
        let mut cargo = Command::new(cargo);
        cargo
            .args(["build", "--lib", "--manifest-path"])
            .arg(&manifest)
            .arg("--target-dir")
            .arg(&build_dir)
            .current_dir(manifest.parent().unwrap())
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("CARGO_BUILD_TARGET_DIR")
            // Cargo's messages go to stderr; stdout is this script's channel
            // to cargo and must carry nothing else.
            .stdout(Stdio::null());
        if offline {
            cargo.arg("--offline");
        }
        if release {
            cargo.arg("--release");
        }
        if target != host {
            cargo.args(["--target", target]);
        }
        let status = cargo.status();
        (format!("{cargo:?}"), status)
    };
    // Offline first: the outer cargo fetched every crate the library needs
    // (the wrapper's resolution, restricted to what is downloaded, finds
    // them). Should that ever fail, and unless cargo was told to stay
    // offline, a second try may fetch.
    let may_fetch = std::env::var("CARGO_NET_OFFLINE").map_or(true, |v| v != "true");
    let build = |target: &str| -> Result<Vec<u8>, String> {
        let mut attempt = nested(target, true);
        if may_fetch && !matches!(attempt.1, Ok(s) if s.success()) {
            attempt = nested(target, false);
        }
        match attempt {
            (_, Ok(s)) if s.success() => {}
            (cmd, Ok(s)) => return Err(format!("`{cmd}` failed ({s}); its messages are above")),
            (_, Err(e)) => return Err(format!("cannot run cargo: {e}")),
        }
        let mut built = build_dir.clone();
        if target != host {
            built.push(target);
        }
        built.push(if release { "release" } else { "debug" });
        built.push(name);
        std::fs::read(&built).map_err(|e| format!("{}: {e}", built.display()))
    };
    let mut lib = build(&target).unwrap_or_else(|e| fail(&e));
    let other = match target.as_str() {
        "aarch64-apple-darwin" => Some("x86_64-apple-darwin"),
        "x86_64-apple-darwin" => Some("aarch64-apple-darwin"),
        _ => None,
    };
    if let Some(other) = other {
        match build(other).ok().and_then(|o| universal(&[&lib, &o])) {
            Some(fat) => lib = fat,
            None => println!(
                "cargo:warning=the embedded {name} has only {target}'s slice (for both: rustup target add {other}); dyld kills programs of the other architecture, so munmapq runs those without it"
            ),
        }
    }
    // The library's identity for `munmapq --version`: the same FNV-1a
    // hash names its cache directory (src/library/embedded.rs).
    let fnv = lib.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    println!("cargo:rustc-env=MUNMAPQ_BUILT_IN_LIBRARY={fnv:016x}");
    println!(
        "cargo:rustc-env=MUNMAPQ_BUILT_FROM={}",
        commit().unwrap_or_default()
    );
    std::fs::write(out.join(name), lib)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", out.join(name).display())));
    hide_unwinder(&out);
}

/// src/unwinder.rs answers std's references to the unwinder inside the
/// launcher only: exported, its stubs would stand in for libgcc_s's own
/// in any library loaded into the launcher (a C++ library in the user's
/// `LD_PRELOAD` would lose its exceptions). A version script keeps them
/// out of the dynamic symbol table, on the targets that define them.
fn hide_unwinder(out: &std::path::Path) {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let stubs = var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
        && matches!(var("CARGO_CFG_TARGET_ARCH").as_str(), "x86_64" | "aarch64");
    if !stubs {
        return;
    }
    let script = out.join("launcher.ver");
    std::fs::write(&script, "{ local: _Unwind_*; };\n")
        .unwrap_or_else(|e| fail(&format!("{}: {e}", script.display())));
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--version-script={}",
        script.display()
    );
}

/// The commit a build from a git checkout is made of (12 hex digits),
/// for `munmapq --version`; None for a build from a published crate (no
/// `.git` beside Cargo.toml) or without git. Cargo runs this script again
/// when HEAD or the branch it names moves.
fn commit() -> Option<String> {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    if !dir.join(".git").exists() {
        return None;
    }
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .args(args)
            .current_dir(&dir)
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
        (out.status.success() && !s.is_empty()).then_some(s)
    };
    let mut watch = vec![git(&["rev-parse", "--git-path", "HEAD"])?];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.extend(git(&["rev-parse", "--git-path", &branch]));
        watch.extend(git(&["rev-parse", "--git-path", "packed-refs"]));
    }
    for w in watch {
        let file = dir.join(w);
        // A file that does not exist would make cargo run this every
        // time: a branch packed away is watched by its directory, where a
        // commit writes it again.
        let watched = [Some(file.as_path()), file.parent()]
            .into_iter()
            .flatten()
            .find(|p| p.exists());
        if let Some(p) = watched {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    git(&["rev-parse", "--short=12", "HEAD"])
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
