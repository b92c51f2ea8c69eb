//! Signals through the launcher, as through `timeout` or `sudo`:
//! what the caller ignored stays ignored in the command, signals another
//! process sends to the launcher reach the command, a terminal's Ctrl-C
//! reaches it once, the launcher exits as the command did, and killing the
//! launcher kills the command.
#![cfg(target_os = "linux")] // /proc, PR_SET_PDEATHSIG, ptys

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// The command's lines, read by a thread (a test that fails does not hang
/// on a pipe an orphaned command keeps open).
type Lines = Receiver<String>;

fn lines(out: ChildStdout) -> Lines {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// A loop of about 30 s, so that a command the launcher failed to pass a
/// signal to ends anyway.
const LOOP: &str = "i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done";

/// The launcher running `sh -c SCRIPT`, its stdout piped, started with
/// `ignored` signals ignored (as `nohup` or `trap '' SIG` leave them).
fn launch(script: &str, ignored: &'static [libc::c_int]) -> (Child, Lines) {
    let mut c = Command::new(launcher());
    c.args(["sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    // SAFETY: only signal(2) between fork and exec.
    unsafe {
        c.pre_exec(move || {
            for &s in ignored {
                libc::signal(s, libc::SIG_IGN);
            }
            Ok(())
        });
    }
    let mut child = c.spawn().unwrap();
    let out = lines(child.stdout.take().unwrap());
    (child, out)
}

/// The command's next line; "" once it closed its output; a failure after
/// 40 s.
fn line(out: &mut Lines) -> String {
    match out.recv_timeout(Duration::from_secs(40)) {
        Ok(l) => l,
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => String::new(),
        Err(e) => panic!("no line from the command: {e}"),
    }
}

fn kill(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

/// The SigIgn and SigBlk masks of `cat /proc/self/status` started with
/// `ignored` ignored (and SIGUSR2 blocked, if any), directly or through the
/// launcher.
fn sig_ign_of(via_launcher: bool, ignored: &'static [libc::c_int]) -> (u64, u64) {
    let mut c = Command::new(if via_launcher {
        launcher()
    } else {
        "cat".into()
    });
    if via_launcher {
        c.arg("cat");
    }
    c.arg("/proc/self/status");
    // SAFETY: only signal(2) and sigprocmask(2) between fork and exec.
    unsafe {
        c.pre_exec(move || {
            for &s in ignored {
                libc::signal(s, libc::SIG_IGN);
            }
            if !ignored.is_empty() {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGUSR2);
                libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            }
            Ok(())
        });
    }
    let out = output_within(&mut c, MINUTE);
    assert!(out.status.success());
    let status = String::from_utf8_lossy(&out.stdout);
    let mask = |key: &str| {
        let hex = status.lines().find_map(|l| l.strip_prefix(key)).expect(key);
        u64::from_str_radix(hex.trim(), 16).unwrap()
    };
    (mask("SigIgn:"), mask("SigBlk:"))
}

#[test]
fn ignored_signals_stay_ignored_in_the_command() {
    // nohup, trap '' PIPE, a background job's SIGINT and SIGQUIT.
    let ignored = &[libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGPIPE][..];
    let want = ignored.iter().fold(0u64, |m, &s| m | 1 << (s - 1));
    let (direct, via) = (sig_ign_of(false, ignored), sig_ign_of(true, ignored));
    println!(
        "SigIgn {:#x} SigBlk {:#x} through munmapq; {:#x} {:#x} without",
        via.0, via.1, direct.0, direct.1
    );
    assert_eq!(direct.0 & want, want, "{direct:#x?}");
    assert_eq!(
        direct.1 & 1 << (libc::SIGUSR2 - 1),
        1 << (libc::SIGUSR2 - 1)
    );
    assert_eq!(via, direct);
    assert_eq!(sig_ign_of(true, &[]), sig_ign_of(false, &[]));
}

#[test]
fn a_hangup_ignored_by_the_caller_is_survived() {
    // nohup munmapq sh -c ...; then kill -HUP to the launcher.
    let (mut child, mut out) = launch("echo ready; sleep 1; echo alive", &[libc::SIGHUP]);
    assert_eq!(line(&mut out), "ready");
    kill(child.id(), libc::SIGHUP);
    assert_eq!(line(&mut out), "alive");
    let status = wait_a_minute(&mut child);
    assert_eq!(status.code(), Some(0), "{status:?}");
    println!("kill -HUP under nohup: the command ran to its end");
}

#[test]
fn signals_sent_to_the_launcher_reach_the_command() {
    let sent = [
        ("HUP", libc::SIGHUP),
        ("INT", libc::SIGINT),
        ("QUIT", libc::SIGQUIT),
        ("USR1", libc::SIGUSR1),
        ("USR2", libc::SIGUSR2),
        ("WINCH", libc::SIGWINCH),
        ("CONT", libc::SIGCONT),
    ];
    let traps: String = sent
        .iter()
        .map(|(n, _)| format!("trap 'echo got {n}' {n}; "))
        .collect();
    let script = format!("{traps} trap 'echo got TERM; exit 3' TERM; echo ready; {LOOP}");
    let (mut child, mut out) = launch(&script, &[]);
    assert_eq!(line(&mut out), "ready");
    for (name, sig) in sent {
        kill(child.id(), sig);
        assert_eq!(line(&mut out), format!("got {name}"));
    }
    kill(child.id(), libc::SIGTERM);
    assert_eq!(line(&mut out), "got TERM");
    let status = wait_a_minute(&mut child);
    assert_eq!(status.code(), Some(3), "{status:?}");
    println!(
        "HUP INT QUIT USR1 USR2 WINCH CONT TERM forwarded, each once; exit status 3 passed through"
    );

    // A command that dies of the signal: the launcher dies of it too.
    let (mut child, mut out) = launch("echo ready; exec sleep 30", &[]);
    assert_eq!(line(&mut out), "ready");
    std::thread::sleep(Duration::from_millis(100));
    kill(child.id(), libc::SIGUSR1);
    assert_eq!(wait_a_minute(&mut child).signal(), Some(libc::SIGUSR1));
}

/// State of a process ('Z' zombie, 'S' sleeping...), None once reaped.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

#[test]
fn killing_the_launcher_kills_the_command() {
    let (mut child, mut out) = launch("echo $$; exec sleep 30", &[]);
    let pid: u32 = line(&mut out).parse().unwrap();
    kill(child.id(), libc::SIGKILL);
    assert_eq!(wait_a_minute(&mut child).signal(), Some(libc::SIGKILL));
    let start = Instant::now();
    while !matches!(state(pid), None | Some('Z') | Some('X')) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the command outlived its launcher"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("SIGKILL to the launcher: the command ended with it");
}

#[test]
fn a_terminal_interrupt_reaches_the_command_once() {
    // The launcher on a pty of its own, as in a terminal: Ctrl-C there is
    // sent by the kernel to the foreground process group, command included;
    // the launcher must not send it a second time.
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors; no name, termios or size.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0);
    let mut c = Command::new(launcher());
    let script = format!("trap 'echo got INT' INT; trap 'exit 5' TERM; echo ready; {LOOP}");
    c.args(["sh", "-c", &script]).stdout(Stdio::piped());
    // SAFETY: setsid, ioctl and dup2 between fork and exec.
    unsafe {
        c.pre_exec(move || {
            libc::setsid();
            libc::ioctl(slave, libc::TIOCSCTTY, 0);
            libc::dup2(slave, 0);
            Ok(())
        });
    }
    let mut child = c.spawn().unwrap();
    let mut out = lines(child.stdout.take().unwrap());
    assert_eq!(line(&mut out), "ready");
    // SAFETY: writing one byte from a valid buffer to our pty.
    let written = unsafe { libc::write(master, b"\x03".as_ptr().cast(), 1) };
    assert_eq!(written, 1);
    assert_eq!(line(&mut out), "got INT");
    std::thread::sleep(Duration::from_millis(500));
    kill(child.id(), libc::SIGTERM);
    assert_eq!(line(&mut out), "", "a second SIGINT reached the command");
    assert_eq!(wait_a_minute(&mut child).code(), Some(5));
    // SAFETY: closing our own descriptors.
    unsafe {
        libc::close(master);
        libc::close(slave);
    }
    println!("Ctrl-C on the launcher's terminal: the command got one SIGINT");
}

/// `args` run directly, or through the launcher with `launcher_args`
/// first, started with SIGCHLD ignored (as a daemon that never waits, or
/// Python's `signal(SIGCHLD, SIG_IGN)`, may leave it to what it execs).
fn with_sigchld_ignored(launcher_args: Option<&[&str]>, args: &[&str]) -> std::process::Output {
    let mut c = match launcher_args {
        Some(first) => {
            let mut c = Command::new(launcher());
            c.args(first).args(args);
            c
        }
        None => {
            let mut c = Command::new(args[0]);
            c.args(&args[1..]);
            c
        }
    };
    // SAFETY: only signal(2) between fork and exec.
    unsafe {
        c.pre_exec(|| {
            libc::signal(libc::SIGCHLD, libc::SIG_IGN);
            Ok(())
        });
    }
    output_within(&mut c, MINUTE)
}

#[test]
fn a_sigchld_ignored_by_the_caller_neither_hangs_the_report_nor_reaches_the_command_changed() {
    // Ignored, SIGCHLD makes the kernel reap the command unasked and send
    // no SIGCHLD: the launcher that stays its parent must still see it end,
    // and the command must still start with SIGCHLD ignored, as without
    // munmapq (exec mode too).
    let status = |out: &std::process::Output| {
        let text = String::from_utf8_lossy(&out.stdout);
        let hex = text
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .unwrap_or_else(|| panic!("no SigIgn in {text:?}"));
        u64::from_str_radix(hex.trim(), 16).unwrap()
    };
    let cat = ["cat", "/proc/self/status"];
    let direct = with_sigchld_ignored(None, &cat);
    assert!(direct.status.success());
    let direct = status(&direct);
    let chld = 1u64 << (libc::SIGCHLD - 1);
    assert_eq!(direct & chld, chld, "{direct:#x}");
    for first in [&["--stats-out", "/dev/null"][..], &[]] {
        let out = with_sigchld_ignored(Some(first), &["sh", "-c", "exit 3"]);
        assert_eq!(
            out.status.code(),
            Some(3),
            "munmapq {first:?} sh -c 'exit 3': {:?} {}",
            out.status,
            text(&out.stderr)
        );
        let out = with_sigchld_ignored(Some(first), &cat);
        assert!(
            out.status.success(),
            "munmapq {first:?} cat: {:?} {}",
            out.status,
            text(&out.stderr)
        );
        assert_eq!(status(&out), direct, "SigIgn through munmapq {first:?}");
    }
    println!(
        "SIGCHLD ignored by the caller: --stats-out exits 3 as the command did; SigIgn {direct:#x} in the command, as without munmapq"
    );
}
