//! With `--stats`: the private directory the processes' reports go to,
//! and the sentinel, a helper process that serves two purposes.
//!
//! - **Which signals the group got.** A signal sent to the launcher alone
//!   must be passed on to the command; one sent to the process group (a
//!   shell's `kill %1`, the terminal's Ctrl-C) reached the command already.
//!   Their siginfo is the same (SI_USER, the sender's pid), so the launcher
//!   cannot tell them apart by itself. The sentinel is a second member of
//!   the group that blocks every signal: a signal sent to the group is left
//!   pending in it by the same kill(2) that reached the launcher, one sent
//!   to the launcher alone is not. The launcher asks it about each signal
//!   it gets (and so consumes it there).
//! - **Nothing left behind.** The reports go to `DIR/report` (and each
//!   process's counters to `DIR/live-PID-N`), in a directory of the
//!   launcher's (0700) that it removes when it ends. If the launcher is
//!   killed instead, the sentinel sees its end (end of file on their pipe)
//!   and removes the directory; if both are (a SIGKILL to the process
//!   group: `timeout -s KILL`), the cleaner does, a process of its own
//!   session that only waits for the launcher's end. A process of the
//!   command that outlives the launcher (a detached child) cannot recreate
//!   the file: the library opens it with O_CREAT, which fails once the
//!   directory is gone.
//!
//! And on Linux the sentinel stops the command while the launcher is
//! stopped by SIGSTOP, which the launcher cannot catch, and continues the
//! launcher when it stopped with the command (job control) and the command
//! was continued without it: it looks at their states ten times a second
//! while the command runs.

use crate::out::why;
use crate::quote::quote_path;
use std::io::ErrorKind;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// This process's pid namespace (its inode; 0 where there is none): a pid
/// names a process only within its namespace, and containers may share
/// /tmp.
fn pid_namespace() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
}

/// Removes the report directories of this user's runs whose launcher is
/// gone (`munmapq-stats-NS-PID-...`, PID no longer running in this pid
/// namespace NS): left behind only when a SIGKILL took the launcher and
/// its sentinel together (one sent to their whole process group).
fn sweep(base: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let ns = pid_namespace().to_string();
    for e in entries.flatten() {
        let name = e.file_name();
        let mut parts = name
            .to_str()
            .and_then(|n| n.strip_prefix("munmapq-stats-"))
            .unwrap_or("")
            .split('-');
        if parts.next() != Some(ns.as_str()) {
            continue;
        }
        let Some(pid) = parts.next().and_then(|p| p.parse::<libc::pid_t>().ok()) else {
            continue;
        };
        let ours = std::fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_dir() && m.uid() == me);
        // SAFETY: kill with signal 0 only asks whether the pid exists.
        let gone = pid > 0
            && unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if ours && gone {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A fresh private directory for the reports, in `$TMPDIR` (after
/// removing the ones of runs that ended without removing theirs).
pub fn stats_dir() -> Result<PathBuf, String> {
    let base = std::env::temp_dir();
    sweep(&base);
    let ns = pid_namespace();
    for n in 0..100u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p = base.join(format!(
            "munmapq-stats-{ns}-{}-{nanos}-{n}",
            std::process::id()
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(format!(
                    "--stats: cannot create a directory for the reports in {}: {} \
                     (set TMPDIR to a directory you can write to)",
                    quote_path(&base),
                    why(&e)
                ))
            }
        }
    }
    Err(format!(
        "--stats: cannot create a directory for the reports in {}",
        quote_path(&base)
    ))
}

pub struct Sentinel {
    pid: libc::pid_t,
    /// The cleaner's pipe: its end of file is the launcher's end.
    keep: Option<OwnedFd>,
    /// Questions to the sentinel; its end of file is the launcher's end.
    ask: Option<OwnedFd>,
    answers: Option<OwnedFd>,
    dir: PathBuf,
}

fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into `fds`.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(format!("pipe: {}", why(&std::io::Error::last_os_error())));
    }
    // SAFETY: both descriptors are new and ours; FD_CLOEXEC keeps them out
    // of the command.
    unsafe {
        libc::fcntl(fds[0], libc::F_SETFD, libc::FD_CLOEXEC);
        libc::fcntl(fds[1], libc::F_SETFD, libc::FD_CLOEXEC);
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

impl Sentinel {
    /// Starts the sentinel for `dir`. Call with every signal to relay
    /// blocked: it inherits the mask.
    pub fn start(dir: &Path) -> Result<Sentinel, String> {
        let keep = start_cleaner(dir)?;
        let (ask_r, ask_w) = pipe()?;
        let (ans_r, ans_w) = pipe()?;
        // SAFETY: getpid has no preconditions.
        let launcher = unsafe { libc::getpid() };
        // SAFETY: the launcher is single-threaded here, so the child may
        // run ordinary code; it never returns (serve ends in _exit).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!(
                "--stats: fork: {}",
                why(&std::io::Error::last_os_error())
            ));
        }
        if pid == 0 {
            serve(
                launcher,
                ask_r.as_raw_fd(),
                ans_w.as_raw_fd(),
                dir.to_path_buf(),
            );
        }
        Ok(Sentinel {
            pid,
            keep: Some(keep),
            ask: Some(ask_w),
            answers: Some(ans_r),
            dir: dir.to_path_buf(),
        })
    }

    fn send(&self, msg: &[u8]) -> bool {
        let Some(fd) = &self.ask else { return false };
        // SAFETY: writing our buffer to our pipe; SIGPIPE is blocked or
        // ignored in the launcher, so a dead sentinel is an EPIPE.
        let n = unsafe { libc::write(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len()) };
        n == msg.len() as isize
    }

    /// The command runs as `pid`: the one to stop while the launcher is.
    pub fn command_started(&self, pid: libc::pid_t) {
        let mut msg = [b'P', 0, 0, 0, 0];
        msg[1..].copy_from_slice(&pid.to_le_bytes());
        self.send(&msg);
    }

    /// The launcher stops itself because the command stopped by job
    /// control: if the command is continued while the launcher is still
    /// stopped (a SIGCONT to its pid alone), the sentinel continues the
    /// launcher, which would otherwise wait stopped for a command that has
    /// ended.
    pub fn stopping_with_command(&self) {
        self.send(b"S");
    }

    /// The launcher runs again after `stopping_with_command`.
    pub fn resumed(&self) {
        self.send(b"R");
    }

    /// Did `sig` reach the whole process group (then the command has it
    /// already)? Consumes it in the sentinel. false when the sentinel does
    /// not answer within a second.
    pub fn group_got(&self, sig: libc::c_int) -> bool {
        if !self.send(&[b'Q', sig as u8]) {
            return false;
        }
        let Some(fd) = &self.answers else {
            return false;
        };
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd we own.
        if unsafe { libc::poll(&mut p, 1, 1000) } != 1 {
            return false;
        }
        let mut b = [0u8];
        // SAFETY: reading one byte into our buffer.
        let n = unsafe { libc::read(fd.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
        n == 1 && b[0] == 1
    }

    /// The report's file.
    pub fn report_file(&self) -> PathBuf {
        self.dir.join("report")
    }

    /// Removes the directory and lets the sentinel go.
    pub fn finish(mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        self.keep = None;
        self.ask = None;
        self.answers = None;
        // SAFETY: reaping our own child if it is already gone; never blocks.
        unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), libc::WNOHANG) };
    }
}

/// Starts the cleaner: a process of its own session (so that no signal to
/// the launcher's process group or terminal reaches it) that removes `dir`
/// when the launcher's end of their pipe closes, however the launcher ended:
/// a `timeout -s KILL` of the whole group takes the launcher and the
/// sentinel, not it. Answers that end (close-on-exec: the command does not
/// hold it).
fn start_cleaner(dir: &Path) -> Result<OwnedFd, String> {
    let (keep_r, keep_w) = pipe()?;
    // SAFETY: the launcher is single-threaded here; the child and the
    // grandchild never return (both end in _exit).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!(
            "--stats: fork: {}",
            why(&std::io::Error::last_os_error())
        ));
    }
    if pid == 0 {
        // SAFETY: setsid and fork have no memory-safety preconditions; the
        // intermediate child ends at once, so the cleaner is nobody's child
        // to reap.
        unsafe {
            libc::setsid();
            if libc::fork() == 0 {
                clean_when_closed(keep_r.as_raw_fd(), dir);
            }
            libc::_exit(0)
        }
    }
    drop(keep_r);
    // SAFETY: reaping the intermediate child, which ends at once.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    Ok(keep_w)
}

/// The cleaner's life: waits for end of file on `keep`, removes `dir`.
fn clean_when_closed(keep: libc::c_int, dir: &Path) -> ! {
    close_all_but(&[keep]);
    // SAFETY: blocking every signal in this process, on a set we own.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
    let mut b = [0u8; 16];
    loop {
        // SAFETY: reading into our buffer.
        let n = unsafe { libc::read(keep, b.as_mut_ptr().cast(), b.len()) };
        if n == 0 || (n < 0 && std::io::Error::last_os_error().kind() != ErrorKind::Interrupted) {
            break;
        }
    }
    let _ = std::fs::remove_dir_all(dir);
    // SAFETY: ends the cleaner without running the launcher's exit code.
    unsafe { libc::_exit(0) }
}

/// The sentinel's life: answers the launcher's questions until it ends,
/// then removes `dir`.
fn serve(launcher: libc::pid_t, ask: libc::c_int, answer: libc::c_int, dir: PathBuf) -> ! {
    close_all_but(&[ask, answer]);
    let mut command: libc::pid_t = 0;
    let mut stopped = false;
    // The launcher said it stops with the command, and has not said it
    // runs again.
    let mut with_command = false;
    loop {
        let mut p = libc::pollfd {
            fd: ask,
            events: libc::POLLIN,
            revents: 0,
        };
        let timeout = if command > 0 && cfg!(target_os = "linux") {
            100
        } else {
            -1
        };
        // SAFETY: one pollfd we own.
        let r = unsafe { libc::poll(&mut p, 1, timeout) };
        if r == 0 {
            let now = launcher_stopped(launcher);
            if with_command {
                if now && !is_stopped(command) {
                    with_command = false;
                    // SAFETY: kill has no memory-safety preconditions.
                    unsafe { libc::kill(launcher, libc::SIGCONT) };
                }
                stopped = now;
                continue;
            }
            if now && !stopped {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(command, libc::SIGSTOP) };
            }
            stopped = now;
            continue;
        }
        if r < 0 {
            continue; // EINTR
        }
        let mut kind = [0u8];
        if !read_exact(ask, &mut kind) {
            break;
        }
        match kind[0] {
            b'P' => {
                let mut b = [0u8; 4];
                if !read_exact(ask, &mut b) {
                    break;
                }
                command = libc::pid_t::from_le_bytes(b);
            }
            b'S' => with_command = true,
            b'R' => with_command = false,
            b'Q' => {
                let mut s = [0u8];
                if !read_exact(ask, &mut s) {
                    break;
                }
                let got = u8::from(take_pending(s[0] as libc::c_int));
                // SAFETY: writing one byte from our buffer.
                unsafe { libc::write(answer, [got].as_ptr().cast(), 1) };
            }
            _ => break,
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    // SAFETY: ends the sentinel without running the launcher's exit code.
    unsafe { libc::_exit(0) }
}

fn read_exact(fd: libc::c_int, buf: &mut [u8]) -> bool {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: reading into the rest of our buffer.
        let n = unsafe { libc::read(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done) };
        if n > 0 {
            done += n as usize;
        } else if n < 0 && std::io::Error::last_os_error().kind() == ErrorKind::Interrupted {
            continue;
        } else {
            return false;
        }
    }
    true
}

/// Is `sig` pending here? Then take one instance of it.
fn take_pending(sig: libc::c_int) -> bool {
    // SAFETY: sigpending and sigwait on sets we own; sigwait returns at
    // once, as the signal is pending (and blocked).
    unsafe {
        let mut pending: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pending);
        if libc::sigpending(&mut pending) != 0 || libc::sigismember(&pending, sig) != 1 {
            return false;
        }
        let mut one: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut one);
        libc::sigaddset(&mut one, sig);
        let mut got = 0;
        libc::sigwait(&one, &mut got) == 0
    }
}

/// Is the launcher stopped (`T` in /proc/PID/stat)?
fn launcher_stopped(pid: libc::pid_t) -> bool {
    is_stopped(pid)
}

/// Is `pid` stopped (`T` in /proc/PID/stat; not when it has ended)?
fn is_stopped(pid: libc::pid_t) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    stat.rsplit_once(") ")
        .is_some_and(|(_, rest)| rest.starts_with('T'))
}

/// Closes every descriptor but `keep`: the sentinel holds no pipe or
/// terminal of the caller's open (`$(munmapq --stats ...)` would wait).
fn close_all_but(keep: &[libc::c_int]) {
    // SAFETY: getdtablesize has no preconditions.
    let table = unsafe { libc::getdtablesize() }.clamp(3, 65536);
    // Linux closes everything above the highest kept in one call.
    #[cfg(target_os = "linux")]
    let max = {
        let highest = keep.iter().copied().max().unwrap_or(2);
        // SAFETY: close_range takes two numbers and flags; it closes
        // descriptors of this process only.
        let r = unsafe { libc::syscall(libc::SYS_close_range, highest + 1, u32::MAX, 0) };
        if r == 0 {
            highest + 1
        } else {
            table
        }
    };
    #[cfg(not(target_os = "linux"))]
    let max = table;
    for fd in 0..max {
        if !keep.contains(&fd) {
            // SAFETY: closing descriptors of this process, which uses none
            // of them from now on.
            unsafe { libc::close(fd) };
        }
    }
}
