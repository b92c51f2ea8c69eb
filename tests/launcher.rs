//! The `munmapq` command: running programs with the library, passing their
//! status through, saying when the library did not load, and the doctor.
#![cfg(target_os = "linux")] // static/setuid binaries and LD_PRELOAD: Linux

mod common;
use common::*;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

fn munmapq(args: &[&str]) -> std::process::Output {
    output_within(Command::new(launcher()).args(args), MINUTE)
}

/// A statically linked program every glibc system has: ldconfig (on Ubuntu
/// /sbin/ldconfig is a script around ldconfig.real).
fn static_binary() -> &'static str {
    [
        "/sbin/ldconfig.real",
        "/usr/sbin/ldconfig.real",
        "/sbin/ldconfig",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists())
    .expect("no ldconfig")
}

#[test]
fn doctor_verdicts() {
    let out = munmapq(&["doctor", "git"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("would load"));

    let out = munmapq(&["doctor", static_binary()]);
    assert_eq!(out.status.code(), Some(1));
    assert_contains(&out.stdout, "statically linked");
    assert!(text(&out.stdout).contains("instead:"));

    // Set-id programs: tests/doctor.rs (the verdict depends on who owns
    // them and who runs them).

    let out = munmapq(&["doctor", "no-such-command-here"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(text(&out.stdout).contains("command not found"));
    println!("doctor: git would load; static and missing programs: why not, exit 1/127");
}

#[test]
fn says_when_the_library_did_not_load() {
    // Said before it runs (it is exec'd: nobody is left to say it after),
    // from what the doctor knows; -q says nothing.
    let out = munmapq(&[static_binary(), "-p"]);
    assert!(out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("the library will not load: it is statically linked")
            && err.contains("munmapq doctor"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = munmapq(&["-q", static_binary(), "-p"]);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        text(&out.stderr)
    );
    let out = munmapq(&["--stats", "-q", static_binary(), "-p"]);
    assert!(
        !text(&out.stderr).contains("warning"),
        "{}",
        text(&out.stderr)
    );

    let out = munmapq(&["git", "--version"]);
    assert!(out.status.success());
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    println!("launcher: a static binary gets the not-loaded warning, git nothing");
}

#[test]
fn exit_status_and_signals_pass_through() {
    assert_eq!(munmapq(&["sh", "-c", "exit 7"]).status.code(), Some(7));
    assert_eq!(munmapq(&["true"]).status.code(), Some(0));
    let killed = munmapq(&["sh", "-c", "kill -TERM $$"]);
    assert_eq!(
        killed.status.signal(),
        Some(libc::SIGTERM),
        "{:?}",
        killed.status
    );
    let killed = munmapq(&["sh", "-c", "kill -SEGV $$"]);
    assert_eq!(killed.status.signal(), Some(libc::SIGSEGV));
    println!("launcher: exit 7, 0, SIGTERM and SIGSEGV passed through");
}

#[test]
fn launcher_errors_are_one_line_with_conventional_status() {
    for (args, status, needle) in [
        (&["no-such-command-here"][..], 127, "command not found"),
        (
            &["--max-entries", "0", "true"][..],
            125,
            "MUNMAPQ_MAX_ENTRIES",
        ),
        (&["--max-bytes", "lots", "true"][..], 125, "a size"),
        (&["--evict", "newest", "true"][..], 125, "oldest or all"),
        (&["--bogus", "true"][..], 125, "unknown option"),
        (
            &["--lib", "/nonexistent/libmunmapq.so", "true"][..],
            125,
            "/nonexistent/libmunmapq.so",
        ),
        (&[][..], 125, "no command"),
    ] {
        let out = munmapq(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(status), "{args:?}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains(needle), "{args:?}: {err}");
        assert!(
            err.lines().count() == 1
                || err.lines().nth(1) == Some("Try 'munmapq --help' for more information."),
            "{args:?}: {err}"
        );
    }
    println!("launcher: 7 errors, one line each (and where help is), exit 127/125");
}

/// ld.so cuts `LD_PRELOAD` at spaces and colons, with no quoting: a
/// library named with either would never load, so `--lib` and
/// `MUNMAPQ_LIB` refuse it in one line before the command starts, and
/// `preload-env` and the doctor say the same.
#[test]
fn a_library_path_with_a_space_is_refused_in_one_line() {
    let dir = scratch("launcher-lib-space");
    let spaced = dir.join("sp dir");
    std::fs::create_dir_all(&spaced).unwrap();
    let lib_path = spaced.join(LIB_NAME);
    std::fs::copy(lib(), &lib_path).unwrap();
    let accepts = "accepts a path without spaces or colons";
    let marker = dir.join("ran");
    let touch = ["touch", marker.to_str().unwrap()];
    let mut by_option = vec!["--lib", lib_path.to_str().unwrap()];
    by_option.extend(touch);
    let by_variable = || {
        let mut c = Command::new(launcher());
        c.env("MUNMAPQ_LIB", &lib_path);
        c
    };
    for (what, out) in [
        ("--lib", munmapq(&by_option)),
        (
            "MUNMAPQ_LIB",
            output_within(by_variable().args(touch), MINUTE),
        ),
        (
            "MUNMAPQ_LIB",
            output_within(by_variable().arg("preload-env"), MINUTE),
        ),
    ] {
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{what}: {err}");
        assert_eq!(err.lines().count(), 1, "{what}: {err}");
        assert!(err.starts_with(&format!("munmapq: {what}")), "{err}");
        assert!(err.contains(accepts), "{err}");
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    }
    assert!(!marker.exists(), "the command ran");
    let out = output_within(by_variable().args(["doctor", "true"]), MINUTE);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("would NOT load") && said.contains(accepts),
        "{said}"
    );
    println!(
        "launcher: a library path with a space refused (--lib, MUNMAPQ_LIB, preload-env, doctor)"
    );
}

#[test]
fn stats_sum_over_child_processes() {
    let (_dir, file) = scratch_with_data("launcher-stats", 64);
    let probe = probe();
    let script = format!(
        "{p} cycle {file} 500 8 && {p} cycle {file} 300 8",
        p = probe.display()
    );
    let out = munmapq(&["--stats=json", "sh", "-c", &script]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    // sh and the two probes loaded the library and reported.
    assert!(err.contains("\"loaded\":3"), "{err}");
    assert!(err.contains("\"deferred\":800"), "{err}");
    let out = munmapq(&["--stats", "sh", "-c", &script]);
    assert_contains(&out.stderr, "mmap and munmap system calls");
    println!("launcher: --stats sums 3 processes (sh and two probes): 800 deferred");
}

#[test]
fn keeps_what_was_already_preloaded() {
    let out = output_within(
        Command::new(launcher())
            .args(["sh", "-c", "echo \"$LD_PRELOAD\""])
            .env("LD_PRELOAD", "libc.so.6"),
        MINUTE,
    );
    let v = text(&out.stdout);
    assert!(v.starts_with(lib().to_str().unwrap()), "{v}");
    assert!(v.trim_end().ends_with(" libc.so.6"), "{v}");
    println!("launcher: LD_PRELOAD keeps what was there, after libmunmapq");
}

/// ld.so opens an `LD_PRELOAD` entry as bytes: one that is not UTF-8
/// (a Latin-1 directory name) reaches the command exactly as it was.
#[test]
fn keeps_a_preloaded_path_that_is_not_utf8_byte_for_byte() {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let theirs = b"/tmp/caf\xe9/a.so".to_vec();
    let out = output_within(
        Command::new(launcher())
            .args(["printenv", "LD_PRELOAD"])
            .env("LD_PRELOAD", std::ffi::OsString::from_vec(theirs.clone())),
        MINUTE,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut want = lib()
        .canonicalize()
        .unwrap()
        .as_os_str()
        .as_bytes()
        .to_vec();
    want.push(b' ');
    want.extend_from_slice(&theirs);
    want.push(b'\n');
    assert_eq!(
        out.stdout,
        want,
        "{:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    println!("launcher: a non-UTF-8 LD_PRELOAD entry kept byte for byte");
}

/// Another libmunmapq already in LD_PRELOAD (another build, under another
/// name; by path, by bare name, through `$LIB`) gives way to the
/// launcher's: both would hook every call, the second under the first.
#[test]
fn another_libmunmapq_in_ld_preload_gives_way() {
    let dir = scratch("other-copy");
    let other = dir.join("lib-other-build.so");
    std::fs::copy(lib(), &other).unwrap();
    let out = output_within(
        Command::new(launcher())
            .args([
                "sh",
                "-c",
                "printenv LD_PRELOAD; grep -c lib-other-build /proc/self/maps",
            ])
            .env("LD_PRELOAD", &other),
        MINUTE,
    );
    let ours = lib().canonicalize().unwrap();
    assert_eq!(
        text(&out.stdout),
        format!("{}\n0\n", ours.display()),
        "{}",
        text(&out.stderr)
    );
    // The same copy named as the dynamic linker finds it: a bare name in
    // LD_LIBRARY_PATH, and a path through `$LIB` (each value it takes).
    let libs = dir.join("libs");
    for sub in [
        format!("lib/{}-linux-gnu", std::env::consts::ARCH),
        "lib64".into(),
        "lib".into(),
    ] {
        std::fs::create_dir_all(libs.join(&sub)).unwrap();
        std::fs::copy(lib(), libs.join(&sub).join("lib-other-build.so")).unwrap();
    }
    let through_lib = format!("{}/$LIB/lib-other-build.so", libs.display());
    for (entry, search) in [
        ("lib-other-build.so", libs.join("lib")),
        (through_lib.as_str(), dir.to_path_buf()),
    ] {
        let out = output_within(
            Command::new(launcher())
                .args(["printenv", "LD_PRELOAD"])
                .env("LD_PRELOAD", entry)
                .env("LD_LIBRARY_PATH", &search),
            MINUTE,
        );
        assert_eq!(
            text(&out.stdout),
            format!("{}\n", ours.display()),
            "{entry}: {}",
            text(&out.stderr)
        );
    }
    // A library that only names munmapq's variable stays, and so does an
    // entry the dynamic linker cannot use (a /proc file says it is empty:
    // it is not read to its end).
    let src = dir.join("shim.c");
    std::fs::write(
        &src,
        "const char *munmapq_var = \"MUNMAPQ_MAX_ENTRIES\";\nint mmap_shim(void) { return 0; }\n",
    )
    .unwrap();
    let shim = dir.join("libshim.so");
    let cc = std::env::var("MUNMAPQ_TEST_CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&shim)
        .arg(&src)
        .status()
        .unwrap();
    assert!(built.success());
    let list = format!("{} /proc/self/pagemap", shim.display());
    let started = std::time::Instant::now();
    let out = output_within(
        Command::new(launcher())
            .args(["printenv", "LD_PRELOAD"])
            .env("LD_PRELOAD", &list),
        MINUTE,
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(text(&out.stdout), format!("{} {list}\n", ours.display()));
    println!("launcher: another libmunmapq in LD_PRELOAD (a path, a bare name, $LIB) left out, one copy loaded; a library naming its variable and a /proc file kept");
}

/// The command gets the environment as munmapq got it, entry for entry
/// (but for the variables munmapq sets), with `--stats` as when munmapq
/// execs: an entry without `=`, a name given twice (getenv reads the
/// first), the order (tests/c/rawenv.c makes them). And where the preload
/// variable is given twice, the dynamic linker reads the last: the library
/// is in the one it reads.
#[test]
fn the_command_gets_the_environment_entry_for_entry() {
    let dir = scratch("rawenv");
    let rawenv = c_program("rawenv", &dir);
    if under_qemu() {
        // qemu-user starts every program with an environment it rebuilt
        // (an entry without = dropped, a name once, the order reversed),
        // whatever launched it: there is nothing to compare.
        println!(
            "launcher: the environment entry for entry: not under qemu-user, which rebuilds it"
        );
        return;
    }
    let entries = [
        "PATH=/usr/bin:/bin",
        "NOEQUALS",
        "DUP=1",
        "DUP=2",
        "ZZ=z",
        "AA=a",
    ];
    let env_seen = |before: &[&std::ffi::OsStr]| {
        let out = output_within(
            Command::new(&rawenv)
                .args(entries)
                .arg("--")
                .args(before)
                .arg("/usr/bin/env"),
            MINUTE,
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with("LD_PRELOAD=") && !l.starts_with("MUNMAPQ_"))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let plain = env_seen(&[]);
    assert_eq!(plain, entries, "env prints what it got");
    let l = launcher();
    for stats in [&[][..], &["--stats-out", "/dev/null"][..]] {
        let mut before = vec![l.as_os_str()];
        before.extend(stats.iter().map(std::ffi::OsStr::new));
        assert_eq!(env_seen(&before), plain, "{stats:?}");
    }
    let out = output_within(
        Command::new(&rawenv)
            .args(["PATH=/usr/bin:/bin", "LD_PRELOAD=", "LD_PRELOAD="])
            .arg("--")
            .arg(&l)
            .args(["/bin/grep", "-c", "libmunmapq", "/proc/self/maps"]),
        MINUTE,
    );
    assert_ne!(text(&out.stdout).trim(), "0", "{}", text(&out.stderr));
    println!("launcher: an entry without =, a name twice and the order reach the command as given, with --stats too; LD_PRELOAD twice: the library loads");
}

#[test]
fn print_lib_names_the_library() {
    let out = munmapq(&["--print-lib"]);
    assert_eq!(
        text(&out.stdout).trim(),
        lib().canonicalize().unwrap().to_str().unwrap()
    );
    println!("launcher: --print-lib prints the library beside munmapq");
}

/// The launcher runs in front of every git call: it loads no libgcc_s
/// (it never unwinds; src/unwinder.rs answers std's references), and the
/// stand-ins it has instead are its own, not exported, so that a library
/// loaded into it (a C++ library in the user's `LD_PRELOAD`) still gets
/// the real unwinder for its exceptions.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[test]
fn the_launcher_loads_no_unwinder_and_lends_none() {
    let exe = launcher();
    let readelf = |args: &[&str]| {
        let out = Command::new("readelf")
            .args(args)
            .arg(&exe)
            .output()
            .expect("readelf (binutils, with the C compiler)");
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let needed = readelf(&["-d"]);
    let needed: Vec<&str> = needed.lines().filter(|l| l.contains("(NEEDED)")).collect();
    println!("the launcher needs: {needed:?}");
    assert!(!needed.iter().any(|l| l.contains("libgcc_s")), "{needed:?}");
    let symbols = readelf(&["--dyn-syms", "-W"]);
    let lent: Vec<&str> = symbols
        .lines()
        .filter(|l| l.contains("_Unwind_") && !l.contains(" UND "))
        .collect();
    assert!(lent.is_empty(), "exported: {lent:?}");
}
