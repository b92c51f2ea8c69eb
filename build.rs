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
//! both take the same path. A published crate's directory is left alone
//! (it may be read-only, and a build there would write a Cargo.lock into
//! it): it is copied into OUT_DIR and built there as a workspace of its own.
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

/// A published crate (unpacked from a `.crate` file), as opposed to a
/// package inside a checkout.
fn is_packaged(dir: &Path) -> bool {
    dir.join("Cargo.toml.orig").is_file() || dir.join(".cargo_vcs_info.json").is_file()
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst)?;
            // Sources in a registry are read-only; the copy is ours.
            let mut perm = std::fs::metadata(&dst)?.permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perm.set_readonly(false);
            std::fs::set_permissions(&dst, perm)?;
        }
    }
    Ok(())
}

/// The manifest to build: in place in a checkout, else a private copy in
/// OUT_DIR made its own workspace (so no workspace above OUT_DIR claims it).
fn manifest(src: &Path, out: &Path) -> PathBuf {
    if !is_packaged(src) {
        return src.join("Cargo.toml");
    }
    let copy = out.join("munmapq-interpose");
    let _ = std::fs::remove_dir_all(&copy);
    copy_tree(src, &copy).unwrap_or_else(|e| {
        fail(&format!(
            "copying {} to {}: {e}",
            src.display(),
            copy.display()
        ))
    });
    let toml = copy.join("Cargo.toml");
    let text = std::fs::read_to_string(&toml)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", toml.display())));
    std::fs::write(&toml, format!("{text}\n[workspace]\n"))
        .unwrap_or_else(|e| fail(&format!("{}: {e}", toml.display())));
    toml
}

fn main() {
    let src = PathBuf::from(env("DEP_MUNMAPQ_ROOT"));
    let out = PathBuf::from(env("OUT_DIR"));
    let target = env("TARGET");
    let host = env("HOST");
    let release = env("PROFILE") == "release";
    // A directory is watched whole (every file in it, recursively).
    println!("cargo:rerun-if-changed={}", src.display());
    let core = src.join("../core");
    if !is_packaged(&src) && core.is_dir() {
        println!("cargo:rerun-if-changed={}", core.display());
    }
    let name = if target.contains("apple") {
        "libmunmapq.dylib"
    } else {
        "libmunmapq.so"
    };
    let manifest = manifest(&src, &out);
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
            // The library must never unwind into the program that loaded it;
            // a packaged crate's own profile would not say so.
            .args(["--config", "profile.dev.panic=\"abort\""])
            .args(["--config", "profile.release.panic=\"abort\""])
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
    // Offline first: the outer cargo fetched every crate the library needs.
    // A checkout's Cargo.lock can pin other versions than the outer cargo
    // resolved (`cargo install --git` ignores it), so unless cargo was told
    // to stay offline, a second try may fetch them.
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
