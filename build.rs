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
//! workspace), a cdylib from that directory's `cdylib.rs` depending on the
//! directory as a path dependency, is built there. Nothing is written into
//! the source directory (a registry's may be read-only).
//!
//! The nested cargo runs `--offline`: every crate it needs is a dependency
//! of this package too, so the outer cargo has already fetched it (see
//! below for the one case where it may fetch).
//!
//! No library, no launcher: if the library cannot be built, this script
//! fails and says why.

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

/// Writes the package that links `src/../cdylib.rs` into libmunmapq.
fn wrapper(src: &Path, out: &Path) -> PathBuf {
    let dir = out.join("libmunmapq");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
    let manifest = dir.join("Cargo.toml");
    let text = format!(
        "# Written by the munmapq launcher's build script.\n\
         [package]\nname = \"libmunmapq\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [lib]\nname = \"munmapq\"\ncrate-type = [\"cdylib\"]\npath = {}\n\n\
         [dependencies]\nmunmapq-interpose = {{ path = {} }}\n\
         libc = {{ version = \"0.2\", default-features = false }}\n\n\
         # The library never unwinds into the program that loaded it; in\n\
         # release it is one optimised unit (the core's helpers inline into\n\
         # the hooks).\n\
         [profile.dev]\npanic = \"abort\"\n\
         [profile.release]\npanic = \"abort\"\nlto = true\ncodegen-units = 1\n\n\
         [workspace]\n",
        toml_str(&src.join("cdylib.rs")),
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
    let manifest = wrapper(&src, &out);
    let build_dir = out.join("lib-build");
    let mut built = build_dir.clone();
    if target != host {
        built.push(&target);
    }
    built.push(if release { "release" } else { "debug" });
    built.push(name);
    let nested = |offline: bool| {
        let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
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
            cargo.args(["--target", &target]);
        }
        let status = cargo.status();
        (format!("{cargo:?}"), status)
    };
    // Offline first: the outer cargo fetched every crate the library needs
    // (the wrapper's resolution, restricted to what is downloaded, finds
    // them). Should that ever fail, and unless cargo was told to stay
    // offline, a second try may fetch.
    let mut attempt = nested(true);
    let may_fetch = std::env::var("CARGO_NET_OFFLINE").map_or(true, |v| v != "true");
    if may_fetch && !matches!(attempt.1, Ok(s) if s.success()) {
        attempt = nested(false);
    }
    match attempt {
        (_, Ok(s)) if s.success() => {}
        (cmd, Ok(s)) => fail(&format!("`{cmd}` failed ({s}); its messages are above")),
        (_, Err(e)) => fail(&format!("cannot run cargo: {e}")),
    }
    std::fs::copy(&built, out.join(name))
        .unwrap_or_else(|e| fail(&format!("{}: {e}", built.display())));
}
