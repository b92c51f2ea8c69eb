//! The launcher's command line: no panic on a closed pipe, every
//! setting checked before the command starts, munmapq's own words, and the
//! `--stats` summary.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};

fn munmapq(args: &[&str]) -> Output {
    output_within(Command::new(launcher()).args(args), MINUTE)
}

/// The write end of a pipe whose read end is already closed.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into `fds`.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both are ours: the read end is closed, the write end owned.
    unsafe {
        libc::close(fds[0]);
        Stdio::from(OwnedFd::from_raw_fd(fds[1]))
    }
}

/// Runs `c`, which the launcher must refuse before the command starts:
/// status 125, nothing on stdout (the command did not run), one line on
/// stderr (then, for a wrong command line, where help is), which is
/// returned. `what` names the case.
fn refused(c: &mut Command, what: &str) -> String {
    let out = output_within(c, MINUTE);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{what}: {err}");
    assert!(out.stdout.is_empty(), "{what}: the command ran");
    let first = err.lines().next().unwrap_or_default().to_string();
    let rest: Vec<&str> = err.lines().skip(1).collect();
    assert!(
        rest.is_empty() || rest == ["Try 'munmapq --help' for more information."],
        "{what}: {err}"
    );
    first
}

#[test]
fn a_closed_pipe_is_not_a_crash() {
    for args in [
        &["--help"][..],
        &["help"],
        &["--version"],
        &["version"],
        &["--print-lib"],
        &["shell-init", "bash"],
        &["preload-env"],
        &["doctor", "git"],
    ] {
        // stdout closed; stderr read: no panic, success.
        let mut c = Command::new(launcher());
        c.args(args).stdout(closed_pipe()).stderr(Stdio::piped());
        let out = c.spawn().unwrap().wait_with_output().unwrap();
        let err = text(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {:?} {err}",
            out.status
        );
    }
    // stderr closed: the statistics (not delivered: munmapq's failure), an
    // error, a warning.
    for (args, status) in [
        (&["--stats", "true"][..], 125),
        (&["--stats=json", "sh", "-c", "exit 4"], 125),
        (&["--bogus"], 125),
        (&["no-such-command-here"], 127),
    ] {
        let mut c = Command::new(launcher());
        c.args(args).stdout(Stdio::null()).stderr(closed_pipe());
        let s = c.status().unwrap();
        assert_eq!(
            s.code(),
            Some(status),
            "{args:?}: {s:?} (signal {:?})",
            s.signal()
        );
    }
    println!("closed stdout (8 commands) and stderr (4): no panic, their own status");
}

#[test]
fn inherited_variables_are_checked_before_the_command_starts() {
    for (var, value, accepts) in [
        ("MUNMAPQ_EVICT", "lru", "aged, oldest or all"),
        ("MUNMAPQ_MAX_ENTRIES", "0", "an integer from 1 to 8192"),
        ("MUNMAPQ_STATS", "yes", "0 or 1"),
    ] {
        let mut c = Command::new(launcher());
        c.args(["sh", "-c", "echo ran"]).env(var, value);
        let err = refused(&mut c, var);
        assert!(
            err.contains(var) && err.contains(value) && err.contains(accepts),
            "{err}"
        );
    }
    // An option replaces the variable, so the variable is not checked.
    let mut c = Command::new(launcher());
    c.args(["--evict", "all", "true"])
        .env("MUNMAPQ_EVICT", "lru");
    assert!(output_within(&mut c, MINUTE).status.success());
    // Empty is unset, for every variable alike.
    for var in [
        "MUNMAPQ_STATS",
        "MUNMAPQ_STATS_FILE",
        "MUNMAPQ_EVICT",
        "MUNMAPQ_LIB",
    ] {
        let mut c = Command::new(launcher());
        c.args(["sh", "-c", "echo ran"]).env(var, "");
        let out = output_within(&mut c, MINUTE);
        assert_eq!(text(&out.stdout), "ran\n", "{var}=");
        assert!(out.stderr.is_empty(), "{var}=: {}", text(&out.stderr));
    }
    println!("bad MUNMAPQ_* from the environment: refused with status 125 before the command");
}

/// A value or an option that is not UTF-8 is shown as a shell would quote
/// it ($'\xff'), never as U+FFFD, in the same line a UTF-8 one gets (the
/// variable and all it accepts); and a misspelt variable is never told
/// one of munmapq's own (the report directory it hands its children).
#[test]
fn values_that_are_not_utf8_are_quoted_as_a_shell_would() {
    use std::os::unix::ffi::OsStrExt;
    let ff = |s: &[u8]| std::ffi::OsStr::from_bytes(s).to_os_string();
    /// Arguments, variables, what the one line says.
    type Case<'a> = (
        Vec<std::ffi::OsString>,
        &'a [(&'a str, &'a str)],
        &'a [&'a str],
    );
    let cases: [Case; 6] = [
        (
            vec![ff(b"--stats=\xff")],
            &[],
            &["--stats=", "$'\\xff'", "full or json"],
        ),
        (vec![ff(b"--\xff")], &[], &["unknown option", "$'\\xff'"]),
        (
            vec![ff(b"--max-bytes"), ff(b"\xff")],
            &[],
            &["$'\\xff'", "(MUNMAPQ_MAX_BYTES)", "from 1 byte to 1T"],
        ),
        (
            vec![ff(b"--max-entries"), ff(b"1\xff")],
            &[],
            &["$'\\xff'", "(MUNMAPQ_MAX_ENTRIES)", "from 1 to"],
        ),
        (
            vec![ff(b"--stats-out"), ff(b"/nonexistent/\xff/stats")],
            &[],
            &["--stats-out '/nonexistent/'$'\\xff''/stats': "],
        ),
        (
            vec![],
            &[("MUNMAPQ_STAT", "1")],
            &["did you mean MUNMAPQ_STATS"],
        ),
    ];
    for (args, env, said) in cases {
        let mut c = Command::new(launcher());
        c.args(&args)
            .args(["sh", "-c", "echo ran"])
            .envs(env.iter().copied());
        let err = refused(&mut c, &format!("{args:?}"));
        assert!(!err.contains('\u{fffd}'), "{err}");
        assert!(!err.contains("STATS_DIR"), "{err}");
        for s in said {
            assert!(err.contains(s), "{s}: {err}");
        }
    }
    let mut c = Command::new(launcher());
    c.args(["sh", "-c", "echo ran"])
        .env("MUNMAPQ_EVICT", ff(b"\xff"));
    let err = refused(&mut c, "MUNMAPQ_EVICT");
    assert!(
        err.starts_with("munmapq: MUNMAPQ_EVICT=$'\\xff' (from"),
        "{err}"
    );
    println!("values and options that are not UTF-8: quoted as $'\\xff' in the one line a UTF-8 one gets");
}

#[test]
fn files_are_opened_before_the_command_starts() {
    let dir = scratch("cli-files");
    for (args, var) in [
        (&["--stats-out", "/nonexistent/stats"][..], None),
        (&[], Some(("MUNMAPQ_STATS_FILE", "/nonexistent/stats"))),
        (&[], Some(("MUNMAPQ_TRACE", "/nonexistent/trace"))),
    ] {
        let mut c = Command::new(launcher());
        c.args(args).args(["sh", "-c", "echo ran"]);
        if let Some((k, v)) = var {
            c.env(k, v);
        }
        let err = refused(&mut c, &format!("{args:?} {var:?}"));
        assert!(
            err.contains("/nonexistent/") && err.contains("no such file"),
            "{err}"
        );
    }
    // The caller's MUNMAPQ_STATS_FILE gets the lines the library would
    // have written to it.
    let file = dir.join("mine.stats");
    let mut c = Command::new(launcher());
    c.args(["--stats-out", dir.join("out").to_str().unwrap(), "true"])
        .env("MUNMAPQ_STATS_FILE", &file);
    assert!(output_within(&mut c, MINUTE).status.success());
    let lines = std::fs::read_to_string(&file).unwrap();
    assert!(lines.starts_with("munmapq-loaded pid="), "{lines}");
    assert!(lines.contains("\nmunmapq pid="), "{lines}");
    let out = std::fs::read_to_string(dir.join("out")).unwrap();
    assert!(out.contains("\nmunmapq: 1 process loaded"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "--stats-out, MUNMAPQ_STATS_FILE, MUNMAPQ_TRACE: opened first, refused with status 125"
    );
}

#[test]
fn munmapqs_own_words() {
    let help = munmapq(&["help"]);
    assert!(help.status.success());
    assert_eq!(help.stdout, munmapq(&["--help"]).stdout);
    let version = text(&munmapq(&["version"]).stdout);
    assert!(
        version.starts_with(&format!("munmapq {} (", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    // Wrong arguments: status 125, the usage and the way to run a program
    // of that name, then where that word's help is.
    for args in [
        &["version", "2"][..],
        &["doctor"],
        &["selftest", "--fast"],
        &["shell-init"],
        &["preload-env", "bash", "zsh"],
    ] {
        let out = munmapq(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 2, "{err}");
        let word = args[0];
        assert!(err.ends_with(&format!(
            "Try 'munmapq help {word}' for more information.\n"
        )));
        assert!(err.contains(&format!("usage: munmapq {word}")), "{err}");
        assert!(err.contains(&format!("munmapq -- {word}")), "{err}");
    }
    // env is no word of munmapq's: it runs the program env, with or
    // without arguments.
    let env = text(&munmapq(&["env"]).stdout);
    assert!(
        env.contains("\nLD_PRELOAD=") || env.starts_with("LD_PRELOAD="),
        "{env}"
    );
    let out = munmapq(&["env", "sh", "-c", "echo through env"]);
    assert_eq!(text(&out.stdout), "through env\n");
    // A program named like a word: after --.
    let out = munmapq(&["--", "version"]);
    assert_eq!(out.status.code(), Some(127), "{}", text(&out.stderr));
    let out = munmapq(&["--print-lib", "extra"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(text(&out.stderr).contains("--print-lib takes no command"));
    println!("help, version, usage errors with status 125, env and -- run programs");
}

#[test]
fn help_and_shell_output() {
    let help = text(&munmapq(&["--help"]).stdout);
    assert!(!help.contains("mq-replay"), "{help}");
    for needle in [
        "exit status:",
        "127  COMMAND (or its #! interpreter) was not found",
        "~/.cache/munmapq",
        "K, M, G or T",
        "preload-env",
        "munmapq -- NAME",
    ] {
        assert!(help.contains(needle), "{needle}");
    }
    let fish = text(&munmapq(&["shell-init", "fish"]).stdout);
    assert!(fish.starts_with("# munmapq: "), "{fish}");
    assert!(!fish.contains("eval") && !fish.contains("$("), "{fish}");
    assert!(fish.contains("munmapq shell-init fish | source"), "{fish}");
    let fish = text(&munmapq(&["preload-env", "fish"]).stdout);
    assert!(fish.contains("set -gx LD_PRELOAD"), "{fish}");
    assert!(!fish.contains("export") && !fish.contains("$("), "{fish}");
    let sh = text(&munmapq(&["preload-env"]).stdout);
    assert!(sh.contains("export LD_PRELOAD="), "{sh}");
    // The sh form works: sourced by sh, LD_PRELOAD starts with the library.
    let out = output_within(
        Command::new("sh").args(["-c", &format!("{sh}\necho \"$LD_PRELOAD\"")]),
        MINUTE,
    );
    assert!(text(&out.stdout).starts_with(lib().canonicalize().unwrap().to_str().unwrap()));
}

#[test]
fn stats_summary_full_and_json() {
    let (dir, file) = scratch_with_data("cli-stats", 64);
    let p = probe();
    // `; true`: sh forks the probe (and does not exec it), so two processes.
    let script = format!("{p} cycle {file} 500 8; true", p = p.display());
    let out = munmapq(&["--stats", "sh", "-c", &script]);
    let short = text(&out.stderr);
    println!("{short}");
    assert!(out.status.success(), "{short}");
    assert!(short.lines().count() <= 12, "{short}");
    assert!(
        short.contains("\nmunmapq: 2 processes loaded the library\n"),
        "{short}"
    );
    assert!(short.lines().any(|l| l.trim_start().starts_with("reused ")));
    assert!(!short.contains("avoided"), "{short}");
    assert!(short.contains("--stats=full"), "{short}");
    let full = text(&munmapq(&["--stats=full", "sh", "-c", &script]).stderr);
    assert!(
        full.contains("pass_contention") && full.contains("lost_records"),
        "{full}"
    );
    let json = text(&munmapq(&["--stats=json", "sh", "-c", &script]).stderr);
    let want = format!(
        "{{\"schema\":3,\"version\":\"{}\",\"command\":[\"sh\",\"-c\",",
        env!("CARGO_PKG_VERSION")
    );
    assert!(json.starts_with(&want), "{json}");
    for field in [
        "\"exit_code\":0,\"signal\":null,\"elapsed_ms\":",
        "\"loaded\":2,",
    ] {
        assert!(json.contains(field), "{field}: {json}");
    }
    // sh (dash) ends with _exit: its counters were kept in their file.
    assert!(
        json.contains("\"reported\":2,")
            && json.contains("\"incomplete\":null,")
            && json.contains("\"git\":null}"),
        "{json}"
    );
    // Interrupted: the command killed by a signal, its counters kept.
    let out = munmapq(&["--stats", "sh", "-c", &format!("{script}; kill -INT $$")]);
    assert_eq!(out.status.signal(), Some(libc::SIGINT));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("munmapq: sh: ")
            && err.lines().next().unwrap().ends_with(", killed by SIGINT")
            && !err.contains("incomplete"),
        "{err}"
    );
    let out = munmapq(&["--stats=json", "sh", "-c", "kill -TERM $$"]);
    let err = text(&out.stderr);
    assert!(err.contains("\"incomplete\":null,"), "{err}");
    assert!(err.contains("\"exit_code\":null,\"signal\":15,"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn json_report_escapes_every_argument() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    // A quote, a backslash, control characters and a byte that is not
    // UTF-8: the report is still one valid JSON object, the UTF-8
    // arguments come back as given, and the other is shown lossily.
    let args: [&OsStr; 3] = [
        OsStr::new("say \"hi\" \\ there"),
        OsStr::new("tab\tnl\nbell\u{7}del\u{7f}"),
        OsStr::from_bytes(b"caf\xe9!"),
    ];
    let out = output_within(
        munmapq_cmd()
            .args(["--stats=json", "-q", "true"])
            .args(args),
        MINUTE,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let v: serde_json::Value = serde_json::from_str(&err).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(v["schema"], 3, "{err}");
    assert_eq!(
        v["command"],
        serde_json::json!([
            "true",
            "say \"hi\" \\ there",
            "tab\tnl\nbell\u{7}del\u{7f}",
            "caf\u{fffd}!"
        ]),
        "{err}"
    );
}
