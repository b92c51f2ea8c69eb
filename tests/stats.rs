//! `--stats` however the command ends: counters that survive a SIGPIPE or
//! SIGKILL death, a report that cannot be written (125), what the summary
//! says (time, CPU, peak RSS, readable counts) and what it does not (a
//! table of zeros when no process reported).
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

fn json_field<'a>(json: &'a str, key: &str) -> &'a str {
    let at = json
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("no {key} in {json}"));
    let rest = &json[at + key.len() + 3..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    &rest[..end]
}

#[test]
fn counters_survive_a_sigpipe_and_a_sigkill_death() {
    let (dir, file) = scratch_with_data("stats-pipedeath", 4);
    let prog = c_program("pipedeath", &dir);
    let mut child = munmapq_cmd()
        .args(["--stats=json"])
        .arg(&prog)
        .args([&file, "300"])
        .stdin(Stdio::null())
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    let status = wait_a_minute(&mut child);
    // The command died of SIGPIPE; munmapq did not, it exits 128+13.
    assert_eq!((status.code(), status.signal()), (Some(141), None), "{err}");
    assert_eq!(json_field(&err, "signal"), "13", "{err}");
    // Both processes (the program and its fork child killed by SIGKILL)
    // left their counters, though neither reached its exit handlers.
    assert_eq!(json_field(&err, "loaded"), "1", "{err}");
    assert_eq!(json_field(&err, "reported"), "1", "{err}");
    assert_eq!(json_field(&err, "forks"), "1", "{err}");
    assert_eq!(json_field(&err, "incomplete"), "null", "{err}");
    assert_eq!(json_field(&err, "mmap_calls"), "600", "{err}");
    let deferred: u64 = json_field(&err, "deferred").parse().unwrap();
    assert!(deferred >= 598, "{err}");
    println!(
        "SIGPIPE death (and a SIGKILLed fork child): 600 mmaps, {deferred} deferred, counted; munmapq exits 141"
    );
}

/// A child made without the atfork handlers (`_Fork`, a fork through
/// `syscall`) counts in a file of its own, as a fork child: the library
/// at e91e390 left it the parent's, whose exit handlers then removed the
/// parent's file, and the report said the parent's counters were lost.
#[test]
fn a_child_made_without_the_atfork_handlers_counts_as_a_fork_child() {
    let dir = scratch("stats-forkcount");
    let prog = c_program("forkcount", &dir);
    for how in ["_Fork", "syscall"] {
        let out = output_within(
            munmapq_cmd()
                .args(["--stats=json"])
                .arg(&prog)
                .args([dir.to_str().unwrap(), how]),
            MINUTE,
        );
        let err = text(&out.stderr);
        assert!(out.status.success(), "{how}: {err}");
        assert_eq!(json_field(&err, "forks"), "1", "{how}: {err}");
        assert_eq!(json_field(&err, "incomplete"), "null", "{how}: {err}");
        assert_eq!(json_field(&err, "mmap_calls"), "50", "{how}: {err}");
        assert!(json_field(&err, "deferred") != "0", "{how}: {err}");
    }
    println!(
        "_Fork and a fork through syscall: the child counted as a fork child, 50 mmaps in all"
    );
}

#[test]
fn a_report_that_cannot_be_written_is_125() {
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let cases: [(&str, &[&str], Stdio, Stdio); 4] = [
        (
            "--stats-out /dev/full",
            &["--stats-out", "/dev/full", "true"],
            Stdio::null(),
            Stdio::piped(),
        ),
        (
            "--stats-out - >/dev/full",
            &["--stats-out", "-", "true"],
            Stdio::from(full()),
            Stdio::piped(),
        ),
        (
            "--stats-out - | head (gone)",
            &["--stats-out", "-", "true"],
            closed_pipe(),
            Stdio::piped(),
        ),
        (
            "--stats 2>/dev/full",
            &["--stats", "true"],
            Stdio::null(),
            Stdio::from(full()),
        ),
    ];
    for (what, args, stdout, stderr) in cases {
        let mut child = munmapq_cmd()
            .args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut err = String::new();
        if let Some(e) = child.stderr.as_mut() {
            std::io::Read::read_to_string(e, &mut err).unwrap();
        }
        let status = wait_a_minute(&mut child);
        assert_eq!(status.code(), Some(125), "{what}: {err}");
        if !what.contains("2>") {
            assert_eq!(err.lines().count(), 1, "{what}: {err}");
            assert!(err.starts_with("munmapq: --stats"), "{what}: {err}");
        }
    }
    println!("a report that cannot be written: 125, in one line (4 ways)");
}

#[test]
fn the_summary_says_time_cpu_and_peak_rss_in_readable_units() {
    let (_dir, file) = scratch_with_data("stats-summary", 64);
    let p = probe();
    let out = output_within(
        munmapq_cmd()
            .args(["--stats"])
            .arg(&p)
            .args(["cycle", &file, "300", "8"]),
        MINUTE,
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let first = err.lines().next().unwrap();
    assert!(
        first.starts_with(&format!("munmapq: {}: ", p.display()))
            && first.contains(" s elapsed, ")
            && first.contains(" s CPU (")
            && first.contains(" s user, ")
            && first.ends_with(" MiB peak RSS"),
        "{err}"
    );
    assert!(
        err.contains("\nmunmapq: 1 process loaded the library\n"),
        "{err}"
    );
    let bytes = err
        .lines()
        .find(|l| l.trim_start().starts_with("peak_queued_bytes"))
        .unwrap();
    assert!(bytes.contains(" KiB ") || bytes.contains(" MiB "), "{err}");
    assert!(!err.contains("(es)") && !err.contains("(ren)"), "{err}");
    let out = output_within(
        munmapq_cmd()
            .args(["--stats=json"])
            .arg(&p)
            .args(["cycle", &file, "300", "8"]),
        MINUTE,
    );
    let json = text(&out.stderr);
    for key in ["user_ms", "sys_ms", "max_rss_bytes"] {
        assert!(json_field(&json, key).parse::<u64>().is_ok(), "{json}");
    }
    println!("{first}");
}

#[test]
fn no_counters_no_table_of_zeros() {
    // A static program: nothing loads the library, there is nothing to
    // count: said once, and null in JSON, not zeros.
    let stat = [
        "/sbin/ldconfig.real",
        "/usr/sbin/ldconfig.real",
        "/sbin/ldconfig",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists())
    .expect("no ldconfig");
    let out = output_within(munmapq_cmd().args(["--stats", "-q", stat, "-p"]), MINUTE);
    let err = text(&out.stderr);
    assert!(
        err.contains("munmapq: no process loaded the library\n"),
        "{err}"
    );
    assert!(
        !err.contains("mmap_calls") && !err.contains("saved 0 of 0"),
        "{err}"
    );
    let out = output_within(
        munmapq_cmd().args(["--stats=json", "-q", stat, "-p"]),
        MINUTE,
    );
    let json = text(&out.stderr);
    assert_eq!(json_field(&json, "counters"), "null", "{json}");
    println!("nothing loaded: one line, counters null");
}

#[test]
fn a_report_to_a_pipe_is_written_and_a_file_is_still_replaced() {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    // `--stats-out /dev/fd/3 ... 3>&1 | cat`, as `time -o` allows: the
    // report goes down a pipe, which cannot seek.
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two new descriptors into `fds`; close-on-exec,
    // so no other test's command holds the write end.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors are new and ours.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let reader = {
        let mut r = std::fs::File::from(r);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut v = String::new();
            let _ = std::io::Read::read_to_string(&mut r, &mut v);
            let _ = tx.send(v);
        });
        rx
    };
    let mut c = munmapq_cmd();
    c.args(["--stats-out", "/dev/fd/3", "sh", "-c", "exit 3"]);
    let w_fd = w.as_raw_fd();
    // SAFETY: only dup2 and fcntl between fork and exec; descriptor 3 is
    // left open across exec (dup2 onto itself would keep close-on-exec).
    unsafe {
        c.pre_exec(move || {
            let r = if w_fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(w_fd, 3)
            };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = output_within(&mut c, MINUTE);
    drop(w);
    let report = reader
        .recv_timeout(MINUTE)
        .expect("the pipe was still open a minute after munmapq ended");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    assert!(
        report.contains("munmapq: sh: ") && report.contains("1 process loaded"),
        "{report:?}"
    );
    // A regular file is still truncated once the command has started: the
    // report replaces what was there, however long.
    let dir = scratch("stats-out-replaced");
    let file = dir.join("report");
    std::fs::write(&file, "earlier figures\n".repeat(1000)).unwrap();
    let out = output_within(
        munmapq_cmd().args(["--stats-out", file.to_str().unwrap(), "true"]),
        MINUTE,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let kept = std::fs::read_to_string(&file).unwrap();
    assert!(
        kept.starts_with("munmapq: true: ") && !kept.contains("earlier figures"),
        "{kept}"
    );
    println!(
        "--stats-out /dev/fd/3 on a pipe: the report went down it, exit 3; a file is replaced"
    );
}

/// The git calls the launcher makes itself after a `--stats git ...` run
/// (its advice about pack windows) get the launcher's environment, not the
/// command's: no library, no report file of a run that is over.
#[test]
fn the_launchers_own_git_calls_after_the_command_get_none_of_its_variables() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("stats-own-git");
    let repo = repo::small_repo(&dir, "repo");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.join("git.log");
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let fake = bin.join("git");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho \"$1|${{LD_PRELOAD-}}|${{MUNMAPQ_STATS_FILE-}}\" >> '{}'\nexec {} \"$@\"\n",
            log.display(),
            real.trim()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = output_within(
        std::process::Command::new(launcher())
            .args(["--stats", "git", "status"])
            .current_dir(&repo)
            .env("PATH", path)
            .stdout(Stdio::null()),
        MINUTE,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let calls = std::fs::read_to_string(&log).unwrap();
    let (command, own): (Vec<&str>, Vec<&str>) =
        calls.lines().partition(|l| l.starts_with("status|"));
    assert_eq!(command.len(), 1, "{calls}");
    assert!(command[0].contains("libmunmapq"), "{calls}");
    assert!(!own.is_empty(), "the launcher asked git nothing: {calls}");
    for call in &own {
        assert!(call.ends_with("||"), "{call}");
    }
    println!(
        "--stats git status: the command preloaded, the launcher's own {} git calls after it plain",
        own.len()
    );
}
