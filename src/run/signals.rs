//! Signals, as an exec wrapper should treat them (`timeout`, `sudo`):
//!
//! - what the caller ignored stays ignored in the command (`nohup`,
//!   `trap '' PIPE`, a background job's SIGINT/SIGQUIT), and so does the
//!   caller's signal mask;
//! - a signal another process sends to the launcher (TERM, HUP, INT, QUIT,
//!   USR1, USR2, WINCH, CONT) is passed on to the command. One the kernel
//!   sends (a terminal's Ctrl-C, Ctrl-\, hangup or resize) is not: it goes
//!   to the terminal's foreground process group, the command included;
//! - the launcher exits as the command did (same status, or the same signal
//!   re-raised with its default action), and if the launcher itself is
//!   killed (SIGKILL), so is the command (Linux: `PR_SET_PDEATHSIG`).

use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The signals passed on to the command.
pub const FORWARDED: [libc::c_int; 8] = [
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
    libc::SIGCONT,
];

/// The command's pid while it runs (0 before and after).
static CHILD: AtomicI32 = AtomicI32::new(0);

/// The last of INT, TERM, HUP, QUIT the launcher got while the command ran
/// (0: none): the run was interrupted, its figures are incomplete.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);
const INTERRUPTING: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Was SIGPIPE ignored when the launcher started? Rust's runtime ignores it
/// before `main` and resets it to the default in every child it spawns, so
/// the caller's choice is read earlier, by a constructor.
static SIGPIPE_IGNORED: AtomicBool = AtomicBool::new(false);

extern "C" fn read_sigpipe() {
    // SAFETY: a query (no new action) into a zeroed sigaction we own.
    let ignored = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    };
    SIGPIPE_IGNORED.store(ignored, Ordering::Relaxed);
}

/// Runs before `main` (and so before Rust's runtime changes SIGPIPE).
#[cfg(any(target_os = "linux", target_os = "macos"))]
#[used]
#[cfg_attr(target_os = "linux", link_section = ".init_array")]
#[cfg_attr(
    target_os = "macos",
    link_section = "__DATA,__mod_init_func,mod_init_funcs"
)]
static READ_SIGPIPE: extern "C" fn() = read_sigpipe;

/// Did another process send this signal? (A terminal's signals come from
/// the kernel and already reached the command.)
fn sent_by_a_process(sig: libc::c_int, info: &libc::siginfo_t) -> bool {
    if cfg!(target_os = "linux") {
        // SI_USER (kill), SI_QUEUE, SI_TKILL...: user space; SI_KERNEL > 0.
        info.si_code <= 0
    } else {
        // SAFETY: si_pid is part of every siginfo the kernel delivers.
        let from_pid = unsafe { info.si_pid() } != 0;
        from_pid || ![libc::SIGINT, libc::SIGQUIT, libc::SIGWINCH].contains(&sig)
    }
}

/// The handler: passes the signal to the command. Async-signal-safe: only
/// atomics, `kill` and errno (saved and restored).
extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let pid = CHILD.load(Ordering::SeqCst);
    if pid <= 0 || info.is_null() {
        return;
    }
    if INTERRUPTING.contains(&sig) {
        INTERRUPTED.store(sig, Ordering::SeqCst);
    }
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let info = unsafe { &*info };
    // SAFETY: as above.
    if !sent_by_a_process(sig, info) || unsafe { info.si_pid() } == pid {
        return; // from the terminal, or from the command itself
    }
    let errno = errno_location();
    // SAFETY: errno_location answers this thread's errno; kill is
    // async-signal-safe.
    unsafe {
        let saved = *errno;
        libc::kill(pid, sig);
        *errno = saved;
    }
}

fn errno_location() -> *mut libc::c_int {
    // SAFETY: no preconditions; answers this thread's errno.
    #[cfg(target_os = "linux")]
    return unsafe { libc::__errno_location() };
    // SAFETY: as above.
    #[cfg(not(target_os = "linux"))]
    return unsafe { libc::__error() };
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

/// Forwarding for one run of the command.
pub struct Forwarding {
    /// The caller's signal mask, restored in the command and, once it is
    /// started, in the launcher.
    mask: libc::sigset_t,
}

impl Forwarding {
    /// Installs the forwarding handler for each signal the caller did not
    /// ignore, and blocks them until the command's pid is known.
    pub fn install() -> Forwarding {
        let blocked = sigset(&FORWARDED);
        // SAFETY: sigprocmask/sigaction with valid pointers; the handler
        // is async-signal-safe (see `forward`).
        unsafe {
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::sigprocmask(libc::SIG_BLOCK, &blocked, &mut mask);
            for sig in FORWARDED {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                    || old.sa_sigaction == libc::SIG_IGN
                {
                    continue; // ignored it stays, here and in the command
                }
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = forward as *const () as libc::sighandler_t;
                new.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                new.sa_mask = blocked;
                libc::sigaction(sig, &new, std::ptr::null_mut());
            }
            Forwarding { mask }
        }
    }

    /// Makes `cmd` start with the caller's signal state: its mask, SIGPIPE
    /// as the caller had it (ignored signals stay ignored through exec; the
    /// handled ones are reset to the default by exec), and on Linux death
    /// with the launcher.
    pub fn prepare(&self, cmd: &mut Command) {
        let mask = self.mask;
        let pipe = if SIGPIPE_IGNORED.load(Ordering::Relaxed) {
            libc::SIG_IGN
        } else {
            libc::SIG_DFL
        };
        // SAFETY: getpid has no preconditions.
        let launcher = unsafe { libc::getpid() };
        // SAFETY: between fork and exec only async-signal-safe calls
        // (signal, sigprocmask, prctl, getppid, raise), no allocation.
        unsafe {
            cmd.pre_exec(move || {
                libc::signal(libc::SIGPIPE, pipe);
                libc::sigprocmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
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

    /// The command started: forward to it from now on.
    pub fn started(&self, pid: u32) {
        CHILD.store(pid as i32, Ordering::SeqCst);
        // SAFETY: restoring the mask saved in `install`.
        unsafe { libc::sigprocmask(libc::SIG_SETMASK, &self.mask, std::ptr::null_mut()) };
    }

    /// Waits until the command has exited, without reaping it, then stops
    /// forwarding: the pid cannot be reused while it is forwarded to.
    pub fn wait_exited(&self, pid: u32) {
        loop {
            // SAFETY: waitid with a zeroed siginfo we own.
            let r = unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
        CHILD.store(0, Ordering::SeqCst);
    }
}

/// The signal that interrupted the run, if one did.
pub fn interrupted() -> Option<libc::c_int> {
    Some(INTERRUPTED.load(Ordering::SeqCst)).filter(|&s| s != 0)
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

/// Exits as the command did: same code, or the same signal.
pub fn pass_through(status: ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return ExitCode::from(code as u8);
    }
    let sig = status.signal().unwrap_or(libc::SIGKILL);
    // SAFETY: restore the default action and re-raise, so our parent sees
    // the same signal; if we survive it (a signal whose default is to be
    // ignored cannot have killed the command), fall back to 128+N.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let set = sigset(&[sig]);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    ExitCode::from(128 + sig as u8)
}
