//! Signals while the launcher stays the command's parent (`--stats`), as
//! `time` and `timeout --foreground` leave it: both in the caller's
//! process group.
//!
//! - Every signal that can be caught and that the caller did not ignore is
//!   blocked and taken with sigwaitinfo, so none kills the launcher before
//!   it reports. One sent to the launcher alone is passed on to the
//!   command; one the whole group got (the terminal's, a shell's `kill
//!   %1`) is not, as the command has it already (the sentinel tells which,
//!   sentinel.rs); one the command sent to its parent is not either.
//! - What the caller ignored stays ignored, in the command too, and the
//!   command starts with the caller's signal mask. SIGCHLD is the one the
//!   launcher cannot leave ignored for itself (the kernel would reap the
//!   command unasked and send no SIGCHLD): it takes the default action
//!   back, as `timeout` installs its own, and the command gets it ignored
//!   again.
//! - When the command stops by job control (SIGTSTP, SIGTTIN, SIGTTOU, or
//!   any stop after one of these reached the launcher), the launcher stops
//!   (so the shell sees the job stopped); SIGTSTP sent to the launcher is
//!   passed on, which stops the command and then the launcher; SIGCONT
//!   likewise continues it. A command stopped by a SIGSTOP sent to it alone
//!   (htop, a debugger, a watchdog) and continued the same way leaves the
//!   launcher waiting, as `time` and `timeout` do; if the command is
//!   continued directly while the launcher is stopped with it, the
//!   sentinel continues the launcher (sentinel.rs).
//! - The launcher exits as the command did: same status, or the same
//!   signal re-raised with the default action, its own core dump turned
//!   off first. If the launcher is killed, so is the command (Linux:
//!   `PR_SET_PDEATHSIG`).

use super::sentinel::Sentinel;
use super::usage::{wait4, Usage};
use crate::inherited;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitCode, ExitStatus};

/// The signals that end a run early: the report then says so.
const INTERRUPTING: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// The stops of job control (the terminal's, a shell's `kill -TSTP %1`):
/// the launcher stops with the command for these, not for a SIGSTOP sent
/// to the command alone.
const JOB_STOPS: [libc::c_int; 3] = [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];

/// The signals a process can catch (not KILL or STOP, nor the two glibc
/// keeps for its threads).
fn catchable() -> Vec<libc::c_int> {
    #[cfg(target_os = "linux")]
    let (last, reserved) = (libc::SIGRTMAX(), 32..libc::SIGRTMIN());
    #[cfg(not(target_os = "linux"))]
    let (last, reserved) = (31, 0..0);
    (1..=last)
        .filter(|s| ![libc::SIGKILL, libc::SIGSTOP].contains(s) && !reserved.contains(s))
        .collect()
}

/// Did the caller ignore `sig`? (SIGPIPE as it was before Rust's runtime.)
fn ignored(sig: libc::c_int) -> bool {
    if sig == libc::SIGPIPE {
        return inherited::sigpipe_ignored();
    }
    // SAFETY: a query (no new action) into a zeroed sigaction we own.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

fn sigset(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset initializes the set; sigaddset adds valid signals.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// The relay for one run of the command.
pub struct Relay {
    set: libc::sigset_t,
    /// The caller's signal mask, the command's at its start.
    mask: libc::sigset_t,
    /// The caller ignored SIGCHLD: the launcher no longer does, the
    /// command does again.
    chld_ignored: bool,
    /// The last of INT, TERM, HUP, QUIT the launcher got while the command
    /// ran.
    pub interrupted: Option<libc::c_int>,
}

impl Relay {
    /// Blocks every signal to relay (and SIGCHLD): from now on they wait
    /// for `run`. A SIGCHLD the caller ignored gets its default action
    /// back first: ignored, the command's end would be reaped by the
    /// kernel and never signalled, and `run` would wait for it forever or
    /// find no child to wait for.
    pub fn block() -> Relay {
        let chld_ignored = ignored(libc::SIGCHLD);
        if chld_ignored {
            // SAFETY: signal(2) with a valid disposition; no child is
            // running yet.
            unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
        }
        let mut relayed: Vec<libc::c_int> =
            catchable().into_iter().filter(|&s| !ignored(s)).collect();
        relayed.push(libc::SIGCHLD);
        let set = sigset(&relayed);
        let mask = inherited::signal_mask();
        // SAFETY: blocking a set we own.
        unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        Relay {
            set,
            mask,
            chld_ignored,
            interrupted: None,
        }
    }

    /// Makes `cmd` start with the caller's signal state (SIGCHLD ignored
    /// again if it was), and on Linux die with the launcher.
    pub fn prepare(&self, cmd: &mut Command) {
        let restore = inherited::restore(self.mask);
        let chld_ignored = self.chld_ignored;
        // SAFETY: getpid has no preconditions.
        let launcher = unsafe { libc::getpid() };
        // SAFETY: between fork and exec only async-signal-safe calls
        // (signal, sigprocmask, close, prctl, getppid, raise).
        unsafe {
            cmd.pre_exec(move || {
                // exec keeps an ignored signal ignored: the command sees
                // SIGCHLD as the caller left it, not as the launcher needs it.
                if chld_ignored {
                    libc::signal(libc::SIGCHLD, libc::SIG_IGN);
                }
                restore.apply();
                #[cfg(target_os = "linux")]
                {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    if libc::getppid() != launcher {
                        libc::raise(libc::SIGKILL); // the launcher died already
                    }
                }
                let _ = launcher;
                Ok(())
            });
        }
    }

    /// Relays signals to the command `pid` until it ends; its status, and
    /// what it used.
    pub fn run(
        &mut self,
        pid: libc::pid_t,
        sentinel: &Sentinel,
    ) -> std::io::Result<(ExitStatus, Option<Usage>)> {
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        // A job-control stop (SIGTSTP, SIGTTIN, SIGTTOU) reached the
        // launcher since the command last stopped.
        let mut job_stop = false;
        loop {
            let (r, st, usage) = wait4(pid, libc::WNOHANG | libc::WUNTRACED);
            if r == pid {
                if libc::WIFSTOPPED(st) {
                    // The command stopped by job control: so does the
                    // launcher, for the shell to see the job stopped;
                    // unless a SIGCONT is already waiting to be passed on
                    // (the sentinel stopped the command while the launcher
                    // was stopped). Stopped by SIGSTOP alone (a debugger,
                    // htop, a watchdog's kill -STOP), it is continued the
                    // same way, directly: the launcher keeps waiting, as
                    // time and timeout do.
                    let by_job_control = job_stop || JOB_STOPS.contains(&libc::WSTOPSIG(st));
                    job_stop = false;
                    if by_job_control && !pending(libc::SIGCONT) {
                        // The sentinel continues the launcher if the
                        // command is continued behind its back.
                        sentinel.stopping_with_command();
                        // SAFETY: kill has no memory-safety preconditions.
                        unsafe { libc::kill(me, libc::SIGSTOP) };
                        // A stop sent to oneself takes effect before kill
                        // returns: this runs once continued.
                        sentinel.resumed();
                    }
                    continue;
                }
                return Ok((ExitStatus::from_raw(st), usage));
            }
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            let Some((sig, from_process, sender)) = self.next() else {
                continue;
            };
            if sig == libc::SIGCHLD && !from_process {
                continue; // the command (or the sentinel) changed state
            }
            if INTERRUPTING.contains(&sig) {
                self.interrupted = Some(sig);
            }
            if JOB_STOPS.contains(&sig) {
                job_stop = true;
            }
            let group = sentinel.group_got(sig);
            if group || !from_process || sender == pid || sender == me {
                continue;
            }
            // SAFETY: kill has no memory-safety preconditions; the pid is
            // our child's, not yet reaped.
            unsafe { libc::kill(pid, sig) };
        }
    }

    /// The next signal: its number, whether a process sent it, and which.
    #[cfg(target_os = "linux")]
    fn next(&self) -> Option<(libc::c_int, bool, libc::pid_t)> {
        // SAFETY: sigwaitinfo fills the zeroed siginfo we own.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let sig = libc::sigwaitinfo(&self.set, &mut info);
            // SI_USER (kill), SI_QUEUE, SI_TKILL: user space (<= 0).
            (sig > 0).then(|| (sig, info.si_code <= 0, info.si_pid()))
        }
    }

    /// macOS has no sigwaitinfo: every signal counts as sent by a process,
    /// and the sentinel tells the group's apart.
    #[cfg(not(target_os = "linux"))]
    fn next(&self) -> Option<(libc::c_int, bool, libc::pid_t)> {
        let mut sig = 0;
        // SAFETY: sigwait on our set, into our int.
        let r = unsafe { libc::sigwait(&self.set, &mut sig) };
        (r == 0).then_some((sig, true, 0))
    }
}

/// Is `sig` pending (blocked, not yet taken) in the launcher?
fn pending(sig: libc::c_int) -> bool {
    // SAFETY: sigpending into a zeroed set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigpending(&mut set) == 0 && libc::sigismember(&set, sig) == 1
    }
}

/// `SIGINT` for 2, and so on (`signal N` for the rare ones).
pub fn name(sig: libc::c_int) -> String {
    const NAMES: [(libc::c_int, &str); 16] = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGXCPU, "SIGXCPU"),
    ];
    NAMES
        .iter()
        .find(|(n, _)| *n == sig)
        .map_or_else(|| format!("signal {sig}"), |(_, s)| s.to_string())
}

/// Exits as the command did: same code, or the same signal (without a
/// core dump of the launcher's own: the command's is the one that tells).
/// But a SIGPIPE death (the reader of the command's output went away: a
/// pager quit, `| head`) is status 141, as GNU time exits: the launcher
/// itself wrote to no closed pipe, and a caller sees 128+13 either way
/// (`$?`, git's run-command).
pub fn pass_through(status: ExitStatus) -> ExitCode {
    if let Some(code) = status.code() {
        return ExitCode::from(code as u8);
    }
    let sig = status.signal().unwrap_or(libc::SIGKILL);
    if sig == libc::SIGPIPE {
        return ExitCode::from(128 + sig as u8);
    }
    // SAFETY: turning our own core dumps off, restoring the default action
    // and re-raising, so our parent sees the same signal; if we survive it
    // (a signal whose default is to be ignored cannot have killed the
    // command), fall back to 128+N.
    unsafe {
        #[cfg(target_os = "linux")]
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &none);
        libc::signal(sig, libc::SIG_DFL);
        let set = sigset(&[sig]);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    ExitCode::from(128 + sig as u8)
}
