//! `--stats` however the command ends: counters that survive a SIGPIPE or
//! SIGKILL death, a command stopped and continued behind the launcher's
//! back, a report that cannot be written (125), what the summary says
//! (time, CPU, peak RSS, readable counts) and what it does not (a table of
//! zeros when no process reported).
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn munmapq() -> Command {
    let mut c = Command::new(launcher());
    c.env("MUNMAPQ_LIB", lib());
    c
}

/// The write end of a pipe whose reader is gone: a write to it is SIGPIPE.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two new descriptors into `fds`.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both are ours; the read end is closed at once.
    unsafe {
        libc::close(fds[0]);
        Stdio::from(OwnedFd::from_raw_fd(fds[1]))
    }
}

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
    let mut child = munmapq()
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

#[test]
fn a_caller_stats_file_gets_the_lines_of_a_process_killed_by_a_signal() {
    let (dir, file) = scratch_with_data("stats-pipedeath-file", 4);
    let prog = c_program("pipedeath", &dir);
    let lines = dir.join("lines");
    let mut child = munmapq()
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

/// The launcher's child that is not its sentinel: the command, named `comm`.
fn command_of(launcher: u32, comm: &str) -> u32 {
    let start = Instant::now();
    loop {
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let Some((name, rest)) = stat.split_once(" (").and_then(|(_, r)| r.rsplit_once(") "))
            else {
                continue;
            };
            let ppid = rest.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok());
            if name == comm && ppid == Some(launcher) {
                return pid;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no {comm}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

fn kill(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, sig) }, 0);
}

/// Waits up to ten seconds for the launcher to end; None if it has not.
fn ended_within(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(child.id(), libc::SIGKILL);
    let _ = child.wait();
    None
}

#[test]
fn a_command_stopped_and_continued_directly_does_not_hang_the_launcher() {
    // SIGSTOP then SIGCONT to the command's pid alone (htop, a watchdog):
    // the launcher keeps waiting, as time does, and reports.
    let mut child = munmapq()
        .args(["--stats", "sleep", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let launcher = child.id();
    let cmd = command_of(launcher, "sleep");
    kill(cmd, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(state(cmd), Some('T'));
    let launcher_state = state(launcher);
    kill(cmd, libc::SIGCONT);
    let status = ended_within(&mut child, Duration::from_secs(20));
    assert_ne!(launcher_state, Some('T'), "the launcher stopped with it");
    let status = status.expect("the launcher hung after its command was continued");
    assert_eq!(status.code(), Some(0));
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("loaded the library"), "{err}");

    // SIGTSTP to the command alone: the launcher stops with it (a shell
    // sees the job stopped); continued directly, the command ends, and the
    // launcher is continued to report it.
    let mut child = munmapq()
        .args(["--stats", "sleep", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let launcher = child.id();
    let cmd = command_of(launcher, "sleep");
    kill(cmd, libc::SIGTSTP);
    let start = Instant::now();
    while state(launcher) != Some('T') && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(state(launcher), Some('T'), "stops with its command");
    kill(cmd, libc::SIGCONT);
    let status = ended_within(&mut child, Duration::from_secs(20))
        .expect("the launcher stayed stopped after its command ended");
    assert_eq!(status.code(), Some(0));
    println!(
        "command stopped by SIGSTOP / SIGTSTP and continued by pid: the launcher reported, exit 0"
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
        let mut child = munmapq()
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
        munmapq()
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
        munmapq()
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
    let out = output_within(munmapq().args(["--stats", "-q", stat, "-p"]), MINUTE);
    let err = text(&out.stderr);
    assert!(
        err.contains("munmapq: no process loaded the library\n"),
        "{err}"
    );
    assert!(
        !err.contains("mmap_calls") && !err.contains("saved 0 of 0"),
        "{err}"
    );
    let out = output_within(munmapq().args(["--stats=json", "-q", stat, "-p"]), MINUTE);
    let json = text(&out.stderr);
    assert_eq!(json_field(&json, "counters"), "null", "{json}");
    println!("nothing loaded: one line, counters null");
}

#[test]
fn a_sigkill_to_the_whole_group_leaves_nothing_in_tmpdir() {
    use std::os::unix::process::CommandExt;
    let tmp = scratch("stats-group-kill");
    // As `timeout -s KILL 1 munmapq --stats ...` run from a shell: the
    // launcher, its helper and the command in one process group, killed
    // together.
    let mut child = munmapq()
        .args(["--stats", "sleep", "30"])
        .env("TMPDIR", &*tmp)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let listing = || -> Vec<String> {
        std::fs::read_dir(&*tmp)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let start = Instant::now();
    while listing().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no report directory"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    command_of(child.id(), "sleep");
    // SAFETY: kill has no memory-safety preconditions.
    let killed = unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
    assert_eq!(killed, 0);
    assert_eq!(wait_a_minute(&mut child).signal(), Some(libc::SIGKILL));
    let start = Instant::now();
    while !listing().is_empty() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(listing(), Vec::<String>::new(), "left in TMPDIR");
    println!("SIGKILL to the launcher's whole process group: its report directory removed at once");
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
        munmapq()
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
        munmapq()
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
    let launched = output_within(munmapq().args(["--stats", "sh", "-c", script]), MINUTE);
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
