//! The files the library writes its lines to: a caller's
//! `MUNMAPQ_STATS_FILE` under `--stats` gets the lines of processes killed
//! by signals; a relative or unwritable one is one line from the library
//! alone, made absolute or refused by the launcher and the git link; a file
//! size limit is no death for a line of ours.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::process::{Command, Stdio};

#[test]
fn a_caller_stats_file_gets_the_lines_of_a_process_killed_by_a_signal() {
    let (dir, file) = scratch_with_data("stats-pipedeath-file", 4);
    let prog = c_program("pipedeath", &dir);
    let lines = dir.join("lines");
    let mut child = munmapq_cmd()
        .args(["--stats"])
        .arg(&prog)
        .args([&file, "50"])
        .env("MUNMAPQ_STATS_FILE", &lines)
        .stdin(Stdio::null())
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_a_minute(&mut child);
    assert_eq!(status.code(), Some(141));
    let text = std::fs::read_to_string(&lines).unwrap();
    let totals = {
        let mut t = munmapq_core::stats::Totals::default();
        t.add_text(&text);
        t
    };
    assert_eq!(totals.reported, 2, "{text}");
    assert_eq!(totals.get(munmapq_core::stats::Counter::MmapCalls), 100);
    println!("MUNMAPQ_STATS_FILE under --stats: 2 lines for 2 processes killed by signals");
}

#[test]
fn a_stats_file_the_library_alone_cannot_use_is_one_line() {
    let dir = scratch("stats-file-alone");
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let run = |value: &str| {
        output_within(
            Command::new("/bin/sh")
                .args(["-c", "cd sub && exec /bin/sh -c :"])
                .current_dir(&dir)
                .env(PRELOAD_VAR, lib())
                .env("MUNMAPQ_STATS_FILE", value),
            MINUTE,
        )
    };
    // Relative: every process would open it in its own directory.
    let out = run("rel.stats");
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!dir.join("rel.stats").exists() && !sub.join("rel.stats").exists());
    assert_eq!(
        err.matches(
            "munmapq: MUNMAPQ_STATS_FILE=\"rel.stats\" is not valid: it accepts an absolute path"
        )
        .count(),
        2,
        "one line a process: {err}"
    );
    // Unwritable: said, not lost without a word.
    let out = run("/nonexistent/x.stats");
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(
        err.matches(
            "munmapq: MUNMAPQ_STATS_FILE=\"/nonexistent/x.stats\" cannot be opened: no such file or directory; this process's counters are not written\n"
        )
        .count(),
        2,
        "{err}"
    );
    println!("library alone: a relative or unwritable MUNMAPQ_STATS_FILE is one line a process, nothing written");
}

#[test]
fn a_relative_stats_file_is_the_launchers_and_the_git_links() {
    let dir = scratch("stats-file-relative");
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    // Through the launcher, which execs: the processes that change
    // directory write where the caller meant.
    let out = output_within(
        munmapq_cmd()
            .args(["sh", "-c", "cd sub && exec sh -c :"])
            .current_dir(&dir)
            .env("MUNMAPQ_STATS_FILE", "rel.stats"),
        MINUTE,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !sub.join("rel.stats").exists(),
        "lines in the command's directory"
    );
    let lines = std::fs::read_to_string(dir.join("rel.stats")).unwrap();
    assert_eq!(lines.matches("munmapq-loaded pid=").count(), 2, "{lines}");
    // Through the git link: `git -C repo` does not put it in the repository.
    let repo = common::repo::small_repo(&dir, "repo");
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(launcher(), bin.join("git")).unwrap();
    let git = |value: &str| {
        output_within(
            Command::new(bin.join("git"))
                .args(["-c", "munmapq.enable=true", "-C", "repo", "status", "-s"])
                .current_dir(&dir)
                .env("HOME", &*dir)
                .env(
                    "PATH",
                    format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
                )
                .env("MUNMAPQ_LIB", lib())
                .env_remove("MUNMAPQ_GIT_WRAPPER")
                .env("MUNMAPQ_STATS_FILE", value),
            MINUTE,
        )
    };
    let out = git("git.stats");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!repo.join("git.stats").exists(), "lines in the repository");
    let lines = std::fs::read_to_string(dir.join("git.stats")).unwrap();
    assert!(lines.contains("munmapq-loaded pid="), "{lines}");
    // A path that cannot be written: refused as the launcher refuses it.
    let out = git("/nonexistent/x.stats");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(out.stdout.is_empty());
    assert_eq!(
        err,
        "munmapq: MUNMAPQ_STATS_FILE=/nonexistent/x.stats (from the environment): no such file or directory; nothing was run\n"
    );
    let out = output_within(
        munmapq_cmd()
            .args(["true"])
            .env("MUNMAPQ_STATS_FILE", "/nonexistent/x.stats"),
        MINUTE,
    );
    assert_eq!(text(&out.stderr), err, "the launcher says the same");
    println!("relative MUNMAPQ_STATS_FILE: the caller's directory (launcher, git -C); unwritable: 125 from both");
}

#[test]
fn a_file_size_limit_is_no_death_for_a_line_of_ours() {
    // `ulimit -f 0`: any write to a file raises SIGXFSZ. The program writes
    // to a pipe only, and must not die of the library's lines or files.
    let script = "ulimit -f 0; /bin/echo hi";
    let dir = scratch("stats-fsize");
    let file = dir.join("lines");
    std::fs::write(&file, "").unwrap();
    let plain = output_within(Command::new("sh").args(["-c", script]), MINUTE);
    assert_eq!(
        (plain.status.code(), text(&plain.stdout).as_str()),
        (Some(0), "hi\n")
    );
    let alone = output_within(
        Command::new("sh")
            .args(["-c", script])
            .env(PRELOAD_VAR, lib())
            .env("MUNMAPQ_STATS_FILE", &file),
        MINUTE,
    );
    let launched = output_within(munmapq_cmd().args(["--stats", "sh", "-c", script]), MINUTE);
    for (what, out) in [
        ("the library alone", &alone),
        ("munmapq --stats", &launched),
    ] {
        assert_eq!(
            (out.status.code(), text(&out.stdout).as_str()),
            (Some(0), "hi\n"),
            "{what}: {}",
            text(&out.stderr)
        );
    }
    println!("ulimit -f 0: /bin/echo lives, with the library alone and under --stats");
}
