//! What a command used, as `time` reports it: its CPU time and the largest
//! resident set, from the resource usage `wait4` answers with its status
//! (the command's own and that of the processes it waited for).

use std::time::Duration;

/// A finished command's resource usage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub user: Duration,
    pub sys: Duration,
    /// The largest resident set of the command or of a process it waited
    /// for, when the system says.
    pub max_rss_bytes: Option<u64>,
}

impl Usage {
    fn from_rusage(r: &libc::rusage) -> Usage {
        let time = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        // Linux counts ru_maxrss in KiB (getrusage(2)); macOS in bytes.
        let unit = if cfg!(target_os = "macos") { 1 } else { 1024 };
        Usage {
            user: time(r.ru_utime),
            sys: time(r.ru_stime),
            max_rss_bytes: (r.ru_maxrss > 0).then(|| r.ru_maxrss as u64 * unit),
        }
    }

    /// User and system time together.
    pub fn cpu(&self) -> Duration {
        self.user + self.sys
    }
}

/// `waitpid(pid, flags)` with the child's resource usage: the pid waited
/// for (0 with `WNOHANG` when none changed state, -1 on error, errno
/// set), its raw status, and its usage when it ended (not when it stopped).
pub fn wait4(pid: libc::pid_t, flags: libc::c_int) -> (libc::pid_t, libc::c_int, Option<Usage>) {
    let mut status = 0;
    // SAFETY: a zeroed rusage and an int of ours for wait4 to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pointers to our own status and rusage.
    let r = unsafe { libc::wait4(pid, &mut status, flags, &mut ru) };
    let ended = r > 0 && (libc::WIFEXITED(status) || libc::WIFSIGNALED(status));
    (r, status, ended.then(|| Usage::from_rusage(&ru)))
}
