//! The launcher's names and identity as a user meets them: `--version`
//! tells two builds apart, a misspelt `MUNMAPQ_*` variable and a bad
//! `MUNMAPQ_LIB` are refused in one line that names them, every name in a
//! message is quoted one way, a munmapq linked under a program's name runs
//! that program (as eatmydata's links do), and with PATH unset commands are
//! searched where `env` searches them.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Output};

fn munmapq(args: &[&str]) -> Output {
    output_within(Command::new(launcher()).args(args), MINUTE)
}

/// Status 125, nothing run (no stdout), one line on stderr: returned.
fn refused(c: &mut Command, what: &str) -> String {
    let out = output_within(c, MINUTE);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{what}: {err}");
    assert!(out.stdout.is_empty(), "{what}: the command ran");
    assert_eq!(err.lines().count(), 1, "{what}: {err}");
    err
}

#[test]
fn the_version_names_the_commit_and_the_library() {
    let v = text(&munmapq(&["--version"]).stdout);
    assert_eq!(v, text(&munmapq(&["version"]).stdout));
    assert!(
        v.starts_with(&format!("munmapq {} (", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    // The library it carries, by the hash that names its cache directory.
    let id = v
        .split("built-in library ")
        .nth(1)
        .and_then(|r| r.get(..16))
        .unwrap_or_else(|| panic!("no library identity: {v}"));
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{v}");
    // Built from a checkout: the commit, as git names it.
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    match head {
        Ok(h) if h.status.success() => {
            let head = text(&h.stdout);
            // A build a commit behind (made before the last commit) names
            // its own; a commit it names is this checkout's.
            let named = v.split("commit ").nth(1).map(|r| &r[..12]);
            let named = named.unwrap_or_else(|| panic!("no commit: {v}"));
            let known = Command::new("git")
                .args(["cat-file", "-e", &format!("{named}^{{commit}}")])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .is_ok_and(|s| s.success());
            assert!(known, "{v} (HEAD {head})");
        }
        _ => println!("not a git checkout: no commit to compare"),
    }
    println!("--version: {}", v.trim());
}

#[test]
fn a_misspelt_variable_is_refused_with_the_name_it_resembles() {
    for (typo, meant) in [
        ("MUNMAPQ_MAXENTRIES", "MUNMAPQ_MAX_ENTRIES"),
        ("MUNMAPQ_max_bytes", "MUNMAPQ_MAX_BYTES"),
        ("MUNMAPQ_DISABLED", "MUNMAPQ_DISABLE"),
        ("MUNMAPQ_STAT_FILE", "MUNMAPQ_STATS_FILE"),
    ] {
        let mut c = Command::new(launcher());
        c.args(["sh", "-c", "echo ran"]).env(typo, "5");
        let err = refused(&mut c, typo);
        assert!(
            err.contains(typo) && err.contains(&format!("did you mean {meant}?")),
            "{err}"
        );
    }
    // A name like none of munmapq's is another tool's: left alone.
    let out = output_within(
        Command::new(launcher())
            .args(["sh", "-c", "echo ran"])
            .env("MUNMAPQ_SOMETHING_ELSE_ENTIRELY", "1"),
        MINUTE,
    );
    assert_eq!(text(&out.stdout), "ran\n", "{}", text(&out.stderr));
    println!("MUNMAPQ_MAXENTRIES=5 munmapq ...: refused, did you mean MUNMAPQ_MAX_ENTRIES?");
}

#[test]
fn a_bad_munmapq_lib_is_named_with_its_fix() {
    let dir = scratch("bad-munmapq-lib");
    let missing = dir.join("nope.so");
    let mut c = Command::new(launcher());
    c.args(["sh", "-c", "echo ran"])
        .env("MUNMAPQ_LIB", &missing);
    let err = refused(&mut c, "MUNMAPQ_LIB missing");
    assert!(
        err.contains(&format!("MUNMAPQ_LIB={}", missing.display())),
        "{err}"
    );
    assert!(err.contains("no such file or directory"), "{err}");
    assert!(!err.contains("os error"), "Rust's words: {err}");
    assert!(err.contains("unset MUNMAPQ_LIB"), "no fix: {err}");
    // Given as --lib, it is the option that is named.
    let err = refused(
        Command::new(launcher()).args(["--lib", missing.to_str().unwrap(), "true"]),
        "--lib missing",
    );
    assert!(err.contains("--lib ") && !err.contains("os error"), "{err}");
    println!("{}", err.trim());
}

#[test]
fn names_are_quoted_one_way() {
    let out = munmapq(&[""]);
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(text(&out.stderr), "munmapq: '': command not found\n");
    let odd = std::ffi::OsStr::from_bytes(b"a\xffb c");
    let out = output_within(Command::new(launcher()).arg(odd), MINUTE);
    assert_eq!(out.status.code(), Some(127));
    let said = text(&out.stderr);
    assert_eq!(said, "munmapq: 'a'$'\\xff''b c': command not found\n");
    // The same byte in an option's value reads the same.
    let out = output_within(
        Command::new(launcher())
            .arg("--max-entries")
            .arg(odd)
            .arg("true"),
        MINUTE,
    );
    assert!(
        text(&out.stderr).contains("'a'$'\\xff''b c'"),
        "{}",
        text(&out.stderr)
    );
    println!("{}", said.trim());
}

/// A directory holding munmapq linked as `name`.
fn linked_as(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join(name);
    std::os::unix::fs::symlink(launcher(), &link).unwrap();
    link
}

#[test]
fn linked_under_a_programs_name_it_runs_that_program() {
    let dir = scratch("linked-as-ls");
    let ls = linked_as(&dir, "ls");
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    // Its options are ls's own, and ls runs with the library.
    let out = output_within(
        Command::new(&ls).args(["-d", "/"]).env("PATH", &path),
        MINUTE,
    );
    assert_eq!(text(&out.stdout), "/\n", "{}", text(&out.stderr));
    assert!(out.status.success());
    let sh = linked_as(&dir, "sh");
    let out = output_within(
        Command::new(&sh)
            .args(["-c", &format!("grep -c {LIB_NAME} /proc/$$/maps")])
            .env("PATH", &path),
        MINUTE,
    );
    let loaded: u32 = text(&out.stdout).trim().parse().unwrap_or(0);
    assert!(
        loaded > 0,
        "sh ran without the library: {}",
        text(&out.stderr)
    );
    // No such program past the link: 127, said as such.
    let out = output_within(
        Command::new(linked_as(&dir, "no-such-program-here")).env("PATH", &path),
        MINUTE,
    );
    assert_eq!(out.status.code(), Some(127), "{}", text(&out.stderr));
    assert_contains(&out.stderr, "no-such-program-here: command not found");
    println!("linked as ls: ls -d / lists /; linked as sh: sh runs with the library");
}

#[test]
fn with_path_unset_the_default_path_is_searched() {
    let dir = scratch("path-unset");
    let git = linked_as(&dir, "git");
    let out = output_within(
        Command::new(&git)
            .arg("--version")
            .env_clear()
            .env("HOME", &*dir),
        MINUTE,
    );
    let has_git = ["/bin/git", "/usr/bin/git"]
        .iter()
        .any(|p| std::path::Path::new(p).exists());
    if has_git {
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).starts_with("git version"));
    } else {
        assert_eq!(out.status.code(), Some(127));
        assert_contains(&out.stderr, "PATH is unset");
    }
    // The launcher, as env does.
    let out = output_within(
        Command::new(launcher())
            .args(["sh", "-c", "echo ran"])
            .env_clear(),
        MINUTE,
    );
    assert_eq!(text(&out.stdout), "ran\n", "{}", text(&out.stderr));
    println!("PATH unset: git and sh found in /bin:/usr/bin, as env finds them");
}
