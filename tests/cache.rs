//! Where a launcher with no library beside it (what `cargo install` gives)
//! writes the one it carries: `$XDG_CACHE_HOME` only if
//! absolute, then `~/.cache`, then `$TMPDIR/munmapq-UID`; a user without a
//! writable home still runs; when nothing works, one line naming the cause
//! and the fix; other versions unused for a month are removed; and a run
//! does not hash the library to find its directory.
//!
//! The unprivileged cases really drop privileges (`setpriv` to `nobody`):
//! root ignores directory permissions.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A scratch directory (removed when the test ends) with a copy of the
/// launcher alone in it (no library beside it, so it uses the one it
/// carries), readable by everyone.
fn lone_launcher(name: &str) -> (Scratch, PathBuf) {
    let dir = scratch(name);
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("munmapq");
    std::fs::copy(launcher(), &exe).unwrap();
    for d in [&*dir, &*bin] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (dir, exe)
}

/// Runs `exe ARGS` with exactly `env` (plus PATH), as `nobody` when
/// `unprivileged`.
fn run_as(unprivileged: bool, exe: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = if unprivileged {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
        c.arg(exe);
        c
    } else {
        Command::new(exe)
    };
    c.args(args).env_clear().env("PATH", "/usr/bin:/bin");
    for (k, v) in env {
        c.env(k, v);
    }
    output_within(&mut c, MINUTE)
}

/// A world-writable sticky directory, as /tmp is.
fn shared_tmp(p: &Path) -> PathBuf {
    dir_with_mode(p, 0o1777)
}

/// The directory `p`, made if missing, with permissions `mode`.
fn dir_with_mode(p: &Path, mode: u32) -> PathBuf {
    std::fs::create_dir_all(p).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    p.to_path_buf()
}

#[test]
fn relative_xdg_cache_home_is_ignored() {
    let (dir, exe) = lone_launcher("cache-xdg");
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut c = Command::new(&exe);
    c.arg("--print-lib")
        .current_dir(&dir)
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", "relative/cache");
    let out = output_within(&mut c, MINUTE);
    let lib = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        lib.starts_with(home.join(".cache/munmapq/").to_str().unwrap()),
        "{lib}"
    );
    assert!(!dir.join("relative").exists());
    println!("XDG_CACHE_HOME=relative/cache: ignored, {lib}");
}

#[test]
fn a_user_without_a_writable_home_still_runs() {
    let (dir, exe) = lone_launcher("cache-nobody");
    let tmp = shared_tmp(&dir.join("tmp"));
    // A home that does not exist, and one that is not ours (read-only).
    let readonly = dir_with_mode(&dir.join("readonly-home"), 0o755);
    for home in [Path::new("/nonexistent"), &readonly] {
        let env = [("HOME", home), ("TMPDIR", &tmp)];
        let out = run_as(true, &exe, &["--stats=json", "true"], &env);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "HOME={}: {err}", home.display());
        assert!(err.contains("\"loaded\":1"), "{err}");
        let lib = text(&run_as(true, &exe, &["--print-lib"], &env).stdout);
        assert!(
            lib.starts_with(tmp.join("munmapq-65534/").to_str().unwrap()),
            "{lib}"
        );
        println!("nobody, HOME={}: ran with {}", home.display(), lib.trim());
    }
}

#[test]
fn no_usable_cache_is_one_line_with_the_cause_and_the_fix() {
    let (dir, exe) = lone_launcher("cache-none");
    let tmp = shared_tmp(&dir.join("tmp"));
    // Someone else's directory where ours would go: refused, not used.
    dir_with_mode(&tmp.join("munmapq-65534"), 0o700);
    let env = [("HOME", Path::new("/nonexistent")), ("TMPDIR", &tmp)];
    // The command runs, without the library, after one line saying why.
    let out = run_as(
        true,
        &exe,
        &["sh", "-c", "echo ran; echo \"[$LD_PRELOAD]\""],
        &env,
    );
    let err = text(&out.stderr);
    println!("{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(text(&out.stdout), "ran\n[]\n");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("running sh without munmapq"), "{err}");
    for needle in [
        "/nonexistent: permission denied",
        "munmapq-65534: not a private directory",
        "--lib PATH",
        "XDG_CACHE_HOME",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

/// ld.so cuts `LD_PRELOAD` at spaces and colons, with no quoting: a cache
/// directory whose path holds either is passed over for the next one, so
/// the library still loads (and nothing is written where it would not).
#[test]
fn a_cache_path_with_a_space_or_a_colon_is_passed_over() {
    let (dir, exe) = lone_launcher("cache-space");
    let tmp = shared_tmp(&dir.join("tmp"));
    let spaced_home = dir.join("my home");
    let home = dir.join("home");
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let in_tmp = tmp.join(format!("munmapq-{uid}/"));
    let in_home = home.join(".cache/munmapq/");
    let (spaced_xdg, colon_xdg) = (dir.join("x y/c"), dir.join("x:y"));
    for (env, want) in [
        (vec![("HOME", &*spaced_home), ("TMPDIR", &*tmp)], &in_tmp),
        (
            vec![("XDG_CACHE_HOME", &*spaced_xdg), ("HOME", &*home)],
            &in_home,
        ),
        (
            vec![("XDG_CACHE_HOME", &*colon_xdg), ("HOME", &*home)],
            &in_home,
        ),
    ] {
        let out = run_as(false, &exe, &["--stats=json", "true"], &env);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{env:?}: {err}");
        assert!(err.contains("\"loaded\":1"), "{env:?}: {err}");
        let lib = text(&run_as(false, &exe, &["--print-lib"], &env).stdout);
        assert!(lib.starts_with(want.to_str().unwrap()), "{env:?}: {lib}");
        println!("{env:?}: ran with {}", lib.trim());
    }
    for unused in [&spaced_home, &spaced_xdg, &colon_xdg] {
        assert!(!unused.exists(), "{} was written", unused.display());
    }
}

#[test]
fn versions_unused_for_a_month_are_removed() {
    let (dir, exe) = lone_launcher("cache-prune");
    let home = dir.join("home");
    let cache = home.join(".cache/munmapq");
    let month_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(40 * 86400);
    for (name, old) in [
        ("0.0.1-0123456789abcdef", true),
        ("0.0.2-fedcba9876543210", false),
        ("my-notes", true),
    ] {
        let d = cache.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(LIB_NAME), b"old").unwrap();
        if old {
            std::fs::File::open(&d)
                .unwrap()
                .set_modified(month_ago)
                .unwrap();
        }
    }
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = run_as(false, &exe, &["--print-lib"], &[("HOME", &home)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lib = text(&out.stdout);
    let current = Path::new(lib.trim()).parent().unwrap().file_name().unwrap();
    let mut left: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    println!("left in the cache: {left:?}");
    assert_eq!(
        left,
        [
            "0.0.2-fedcba9876543210".as_ref(),
            current,
            "my-notes".as_ref()
        ]
    );
}

#[test]
fn read_only_tmp_and_no_home_still_run_the_command() {
    let (dir, exe) = lone_launcher("cache-readonly");
    // A temporary directory nobody (the user) may not write to, no HOME,
    // and nobody's passwd home (/nonexistent): no cache anywhere.
    let tmp = dir_with_mode(&dir.join("tmp"), 0o755);
    let out = run_as(true, &exe, &["sh", "-c", "echo ran"], &[("TMPDIR", &tmp)]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(text(&out.stdout), "ran\n");
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = run_as(
        true,
        &exe,
        &["-q", "sh", "-c", "echo ran"],
        &[("TMPDIR", &tmp)],
    );
    assert!(out.stderr.is_empty(), "-q: {}", text(&out.stderr));
    // The git wrapper: the same, said once (a marker in /dev/shm).
    let bin = dir.join("bin");
    std::os::unix::fs::symlink(&exe, bin.join("git")).unwrap();
    let _ = std::fs::remove_file("/dev/shm/munmapq-65534-no-cache-warned");
    let repo = dir_with_mode(&dir.join("repo"), 0o777);
    let ok = Command::new("git")
        .args(["init", "-q"])
        .arg(&repo)
        .status()
        .unwrap();
    assert!(ok.success());
    let git = bin.join("git");
    let mut said = 0;
    for _ in 0..3 {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&git)
            .args(["-c", "munmapq.enable=true", "-c", "safe.directory=*", "-C"])
            .arg(&repo)
            .arg("status")
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
            )
            .env("TMPDIR", &tmp);
        let out = output_within(&mut c, MINUTE);
        assert!(out.status.success(), "{}", text(&out.stderr));
        said += text(&out.stderr).matches("without munmapq").count();
    }
    let _ = std::fs::remove_file("/dev/shm/munmapq-65534-no-cache-warned");
    assert_eq!(said, 1, "the git wrapper's warning, over 3 calls");
    println!(
        "read-only TMPDIR, no home: the command ran after one warning; git warned once in 3 calls"
    );
}

#[test]
fn stats_with_no_writable_tmpdir_is_one_refusal() {
    let (dir, exe) = lone_launcher("cache-stats-readonly");
    // No cache anywhere and no room for the report: --stats refuses, in
    // one line, without first saying the command would run without the
    // library.
    let tmp = dir_with_mode(&dir.join("tmp"), 0o755);
    let out = run_as(
        true,
        &exe,
        &["--stats", "sh", "-c", "echo ran"],
        &[("TMPDIR", &tmp)],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(out.stdout.is_empty(), "the command ran");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("munmapq: --stats: cannot create a directory for the reports in ")
            && err.contains("TMPDIR")
            && !err.contains("without munmapq"),
        "{err}"
    );
    println!(
        "--stats with no writable TMPDIR and no cache: {}",
        err.trim()
    );
}

#[test]
fn no_home_variable_uses_the_passwd_home() {
    let (dir, exe) = lone_launcher("cache-passwd-home");
    let tmp = shared_tmp(&dir.join("tmp"));
    let out = run_as(false, &exe, &["--print-lib"], &[("TMPDIR", &tmp)]);
    let lib = text(&out.stdout);
    // SAFETY: getpwuid answers a static entry, read at once.
    let home = unsafe {
        let pw = libc::getpwuid(libc::getuid());
        std::ffi::CStr::from_ptr((*pw).pw_dir)
            .to_string_lossy()
            .into_owned()
    };
    assert!(
        lib.starts_with(&format!("{home}/.cache/munmapq/")),
        "{lib} (home {home})"
    );
    println!("HOME unset: {}", lib.trim());
}

/// A launcher run that uses the library it carries checks the cached copy
/// (a read and a compare) but never hashes the library's bytes to name its
/// directory: build.rs did that once. Counted in user instructions
/// (callgrind) for `--print-lib` with the cache already written, in the
/// debug build the tests run: well under a million; hashing its 2.4 MB
/// library as 8c6216e did took 122 million. (A release build's library is
/// 140 KB: its hash cost 0.5 million, under this bound, of each launcher
/// run, the git wrapper's included where it wraps.)
#[test]
fn the_carried_library_is_named_without_hashing_it() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        println!("SKIPPED: no valgrind");
        return;
    }
    let (dir, exe) = lone_launcher("cache-hash");
    let cache = dir.join("cache");
    let env = [("XDG_CACHE_HOME", &*cache)];
    assert!(run_as(false, &exe, &["--print-lib"], &env).status.success());
    let out_file = dir.join("callgrind.out");
    let mut c = Command::new("valgrind");
    c.arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(&exe)
        .arg("--print-lib")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("XDG_CACHE_HOME", &cache);
    let out = output_within(&mut c, 5 * MINUTE);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let counts = std::fs::read_to_string(&out_file).unwrap();
    let total: u64 = counts
        .lines()
        .find_map(|l| l.strip_prefix("totals: "))
        .and_then(|t| t.trim().parse().ok())
        .expect("callgrind totals");
    println!("--print-lib with the cache written: {total} user instructions");
    assert!(total < 5_000_000, "{total} instructions");
}
