//! munmapq's own failures (125, with where help is), 126 and 127 with
//! their reasons, write errors, `--stats-out` when nothing runs, each
//! word's help, and how the report counts processes and says what was
//! lost.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};

fn munmapq(args: &[&str]) -> Output {
    output_within(Command::new(launcher()).args(args), MINUTE)
}

#[test]
fn own_failures_are_125_and_flags_refuse_a_value() {
    for args in [
        &["--disable=0", "true"][..],
        &["--no-reuse=yes", "true"],
        &["--print-lib=foo"],
        &["--help=x"],
        &["--version=x"],
        &["--quiet=1", "true"],
        &["--stat", "true"],
        &["--lib", "/nonexistent/lib.so", "true"],
        &["--lib", "/bin/sh", "true"],
    ] {
        let out = munmapq(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let err = text(&munmapq(&["--stat", "true"]).stderr);
    assert!(err.contains("did you mean --stats?"), "{err}");
    assert!(
        err.ends_with("Try 'munmapq --help' for more information.\n"),
        "{err}"
    );
    let err = text(&munmapq(&["--lib", "/bin/sh", "true"]).stderr);
    assert!(err.contains("not a shared library"), "{err}");
    // 127 with a hint toward munmapq's own words; 126.
    let out = munmapq(&["doctr", "git"]);
    assert_eq!(out.status.code(), Some(127));
    assert_contains(
        &out.stderr,
        "doctr: command not found (did you mean munmapq doctor?)",
    );
    let out = munmapq(&["/etc"]);
    assert_eq!(out.status.code(), Some(126));
    assert_contains(&out.stderr, "/etc: is a directory");
    // A script whose #! interpreter is missing: 127, saying so.
    let dir = scratch("cli-interp");
    let script = dir.join("s");
    std::fs::write(&script, "#!/nonexistent/interp\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = munmapq(&[script.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(127));
    assert_contains(
        &out.stderr,
        "its #! interpreter /nonexistent/interp was not found",
    );
    println!("125 for munmapq's own failures, =VALUE refused, 126/127 with the reason");
}

#[test]
fn write_errors_are_125() {
    for args in [
        &["--version"][..],
        &["--print-lib"],
        &["shell-init", "bash"],
        &["help", "doctor"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = Command::new(launcher())
            .args(args)
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        assert_contains(&out.stderr, "write error");
    }
    println!(">/dev/full: 125, write error");
}

#[test]
fn doctor_and_selftest_fail_when_their_output_is_lost() {
    for args in [&["doctor", "git"][..], &["selftest"]] {
        for closed in [false, true] {
            let mut c = Command::new(launcher());
            c.args(args).stdin(Stdio::null()).stderr(Stdio::piped());
            if closed {
                // SAFETY: closing stdout in the child before exec.
                unsafe {
                    c.pre_exec(|| {
                        libc::close(1);
                        Ok(())
                    })
                };
            } else {
                c.stdout(
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open("/dev/full")
                        .unwrap(),
                );
            }
            let out = output_of(c);
            assert_eq!(out.status.code(), Some(125), "{args:?} closed={closed}");
            assert_contains(&out.stderr, "munmapq: write error: ");
        }
    }
    println!("doctor, selftest: >/dev/full and a closed stdout are 125, write error");
}

/// Runs `c` (stdout set by the caller) within a minute.
fn output_of(mut c: Command) -> Output {
    let mut child = spawn_copied(&mut c);
    let mut err = Vec::new();
    std::io::Read::read_to_end(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    let status = wait_a_minute(&mut child);
    Output {
        status,
        stdout: Vec::new(),
        stderr: err,
    }
}

#[test]
fn stats_out_is_kept_when_nothing_runs_and_dash_is_stdout() {
    let dir = scratch("cli-stats-out");
    let file = dir.join("old");
    std::fs::write(&file, "earlier figures\n").unwrap();
    let out = munmapq(&[
        "--stats-out",
        file.to_str().unwrap(),
        "no-such-program-here",
    ]);
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "earlier figures\n");
    let new = dir.join("new");
    munmapq(&["--stats-out", new.to_str().unwrap(), "no-such-program-here"]);
    assert!(!new.exists(), "a file nobody needed");
    let out = output_within(
        Command::new(launcher())
            .args(["--stats-out", "-", "true"])
            .current_dir(&dir),
        MINUTE,
    );
    assert!(
        text(&out.stdout).contains("\nmunmapq: 1 process loaded"),
        "{}",
        text(&out.stdout)
    );
    assert!(!dir.join("-").exists());
    println!("--stats-out: untouched when nothing ran; - is stdout");
}

#[test]
fn each_word_has_its_help() {
    for word in [
        "doctor",
        "selftest",
        "bench",
        "shell-init",
        "preload-env",
        "help",
        "version",
    ] {
        let a = munmapq(&["help", word]);
        let b = munmapq(&[word, "--help"]);
        let c = munmapq(&[word, "-h"]);
        for out in [&a, &b, &c] {
            assert_eq!(out.status.code(), Some(0), "{word}: {}", text(&out.stderr));
        }
        assert!(
            text(&a.stdout).starts_with(&format!("usage: munmapq {word}")),
            "{word}"
        );
        assert_eq!(a.stdout, b.stdout);
        assert_eq!(a.stdout, c.stdout);
    }
    let out = munmapq(&["help", "doctr"]);
    assert_eq!(out.status.code(), Some(125));
    assert_contains(&out.stderr, "did you mean doctor?");
    println!("help WORD, WORD --help, WORD -h: that word's help, status 0");
}

#[test]
fn the_report_counts_processes_as_a_user_does_and_says_what_was_lost() {
    // Fork children that only exit are their parent's; an exec in the
    // same pid is the same process.
    let out = munmapq(&[
        "--stats=json",
        "bash",
        "-c",
        "( : ); ( : ); ( : ); exec /bin/true",
    ]);
    let json = text(&out.stderr);
    assert!(
        json.contains("\"loaded\":1,\"reported\":1,\"forks\":3,"),
        "{json}"
    );
    assert!(json.contains("\"incomplete\":null"), "{json}");
    let out = munmapq(&["--stats", "sh", "-c", "exec /bin/true"]);
    assert_contains(&out.stderr, "\nmunmapq: 1 process loaded the library\n");
    // Killed by SIGPIPE (as git log | head -1): said, its counters kept;
    // munmapq exits 141 rather than die of it.
    let out = munmapq(&["--stats", "bash", "-c", "kill -PIPE $$"]);
    assert_eq!(out.status.code(), Some(141));
    assert_contains(&out.stderr, ", killed by SIGPIPE\n");
    assert!(!text(&out.stderr).contains("incomplete"));
    println!(
        "bash with 3 subshells: 1 process (3 fork children); sh -c 'exec true': 1; SIGPIPE: said"
    );
}
