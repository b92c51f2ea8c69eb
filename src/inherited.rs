//! What the caller gave the launcher that its start (`start`, as Rust's
//! runtime would) changes before `main`, read by a constructor that runs
//! first, and put back in every program the launcher execs or starts:
//!
//! - whether SIGPIPE was ignored (`start` ignores it, and Rust resets it
//!   to the default in the programs it starts);
//! - which of stdin, stdout and stderr were closed (`start` opens
//!   /dev/null on a closed one, so `munmapq sh -c 'echo hi' >&-` would write into
//!   /dev/null where `sh -c 'echo hi' >&-` fails with an I/O error);
//! - the signal mask (Rust's exec and spawn empty it).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

static SIGPIPE_IGNORED: AtomicBool = AtomicBool::new(false);
/// Bit N: descriptor N (0, 1, 2) was closed.
static CLOSED: AtomicU8 = AtomicU8::new(0);

extern "C" fn read_at_start() {
    // SAFETY: a query (no new action) into a zeroed sigaction we own.
    let ignored = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    };
    SIGPIPE_IGNORED.store(ignored, Ordering::Relaxed);
    // One poll for the three (POLLNVAL: closed), as Rust's runtime asks.
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    let mut closed = 0u8;
    // SAFETY: three pollfds we own; a zero timeout never blocks.
    if unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } >= 0 {
        for (i, p) in fds.iter().enumerate() {
            if p.revents & libc::POLLNVAL != 0 {
                closed |= 1 << i;
            }
        }
    }
    CLOSED.store(closed, Ordering::Relaxed);
}

/// Runs before `main` (and so before `start` changes anything).
#[cfg(any(target_os = "linux", target_os = "macos"))]
#[used]
#[cfg_attr(target_os = "linux", link_section = ".init_array")]
#[cfg_attr(
    target_os = "macos",
    link_section = "__DATA,__mod_init_func,mod_init_funcs"
)]
static READ_AT_START: extern "C" fn() = read_at_start;

/// What Rust's runtime does before `main` that munmapq needs, done by
/// munmapq's own entry point (main.rs), which replaces it: a closed stdin,
/// stdout or stderr opened on /dev/null (so no file munmapq opens becomes
/// one of them: a warning written to stderr must not land in it), and
/// SIGPIPE ignored (a write to a closed pipe is an error munmapq handles,
/// not its death). What the caller gave is put back in every program
/// munmapq execs or starts (`Restore`). Rust's stack guard for the main
/// thread is left out: a stack overflow is then a plain SIGSEGV.
#[cfg_attr(test, allow(dead_code))]
pub fn start() {
    let closed = CLOSED.load(Ordering::Relaxed);
    for fd in 0..3 {
        if closed & (1 << fd) != 0 {
            // SAFETY: open(2) of a constant path; the lowest free
            // descriptor, `fd` (those below it are open by now), is the
            // one it takes. If it is not, the new one is closed again.
            unsafe {
                let got = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                if got >= 0 && got != fd {
                    libc::close(got);
                }
            }
        }
    }
    // SAFETY: signal(2) with a valid disposition.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

/// Was SIGPIPE ignored by the caller?
pub fn sigpipe_ignored() -> bool {
    SIGPIPE_IGNORED.load(Ordering::Relaxed)
}

/// Was descriptor `fd` (0, 1 or 2) closed when the launcher started?
pub fn was_closed(fd: i32) -> bool {
    (0..3).contains(&fd) && CLOSED.load(Ordering::Relaxed) & (1 << fd) != 0
}

/// The current signal mask.
pub fn signal_mask() -> libc::sigset_t {
    // SAFETY: a query into a zeroed set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigprocmask(libc::SIG_BLOCK, std::ptr::null(), &mut set);
        set
    }
}

/// Between fork and exec (or before an exec): puts back what the caller
/// gave, as `restore` captured it. Async-signal-safe: signal, sigprocmask
/// and close only, no allocation.
#[derive(Clone, Copy)]
pub struct Restore {
    mask: libc::sigset_t,
    pipe: libc::sighandler_t,
    closed: u8,
}

/// What to put back in a program started now, with `mask` as its signal
/// mask.
pub fn restore(mask: libc::sigset_t) -> Restore {
    Restore {
        mask,
        pipe: if sigpipe_ignored() {
            libc::SIG_IGN
        } else {
            libc::SIG_DFL
        },
        closed: CLOSED.load(Ordering::Relaxed),
    }
}

impl Restore {
    /// After an exec that failed (the launcher goes on to say why): SIGPIPE
    /// ignored again, as `start` had it, so a closed stderr is a
    /// failed write, not a death.
    pub fn undo(&self) {
        // SAFETY: signal(2) with a valid disposition.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    }

    /// Call only between fork and exec, or right before an exec.
    pub fn apply(&self) {
        // SAFETY: async-signal-safe calls on values we own; closing a
        // descriptor that was closed when we started, which `start` reopened
        // on /dev/null.
        unsafe {
            // Both set whatever Rust did: its reset is not the same in
            // every path (a spawned child keeps the launcher's mask).
            libc::signal(libc::SIGPIPE, self.pipe);
            libc::sigprocmask(libc::SIG_SETMASK, &self.mask, std::ptr::null_mut());
            for fd in 0..3 {
                if self.closed & (1 << fd) != 0 {
                    libc::close(fd);
                }
            }
        }
    }
}

/// Execs `cmd` with what the caller gave put back (signal mask, SIGPIPE,
/// closed stdio); returns only if the exec failed, with SIGPIPE ignored
/// again so that the launcher can say why.
pub fn exec(cmd: &mut std::process::Command) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    let restore = restore(signal_mask());
    // SAFETY: only async-signal-safe calls before the exec (Restore).
    unsafe {
        cmd.pre_exec(move || {
            restore.apply();
            Ok(())
        });
    }
    let err = cmd.exec();
    restore.undo();
    err
}
