//! `--stats` while the command runs: a command stopped and continued
//! behind the launcher's back does not leave it stopped; a SIGKILL to the
//! whole process group leaves nothing in `TMPDIR`.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

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
    let mut child = munmapq_cmd()
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
    // launcher is continued to report it. In a process group of its own, as
    // a shell's job is: the kernel discards a SIGTSTP to a process of an
    // orphaned group (the test's own, where it runs without a terminal).
    let mut child = munmapq_cmd()
        .process_group(0)
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
fn a_sigkill_to_the_whole_group_leaves_nothing_in_tmpdir() {
    use std::os::unix::process::CommandExt;
    let tmp = scratch("stats-group-kill");
    // As `timeout -s KILL 1 munmapq --stats ...` run from a shell: the
    // launcher, its helper and the command in one process group, killed
    // together.
    let mut child = munmapq_cmd()
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
