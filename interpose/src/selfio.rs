//! The file calls munmapq makes for itself (the trace, the stats file):
//! `open`, `write` and `close`, on macOS their non-cancelable variants, and
//! `getpid` for the lines it writes.
//!
//! On macOS all three are pthread cancellation points (xnu
//! `bsd/vfs/vfs_syscalls.c` `open`, `bsd/kern/sys_generic.c` `write`,
//! `bsd/kern/kern_descrip.c` `sys_close` call `__pthread_testcancel(1)`), so
//! a trace record written from inside a hook, or the exit report, would act
//! on a pending cancel in the middle of the program's own call; the
//! `$NOCANCEL` variants (see `macos/real.rs`) never do.
//! scripts/inspect_macho.py checks that the dylib imports no cancelable name
//! but the program's own calls it interposes.
//!
//! On Linux they are raw system calls: glibc's `close` is one of the hooks
//! (so the library's own close would go through its own close hook), and
//! glibc's wrappers are cancellation points too. Each answers what the
//! kernel does (`-errno` on failure, errno untouched), which is all the
//! callers look at (`>= 0`, `> 0`).

#[cfg(target_os = "macos")]
pub use crate::platform::real::libsystem::{
    close_nocancel as close, open_nocancel as open, write_nocancel as write,
};

#[cfg(target_os = "linux")]
mod linux {
    use crate::platform::sys::call;
    use libc::{c_char, c_int, c_long, c_void, size_t, ssize_t};

    /// # Safety
    /// `path` is NUL-terminated.
    pub unsafe fn open(path: *const c_char, flags: c_int, mode: c_int) -> c_int {
        let args = [
            libc::AT_FDCWD as c_long,
            path as c_long,
            flags as c_long,
            mode as c_long,
        ];
        // SAFETY: forwarded from our caller's contract; the kernel checks the rest.
        unsafe { call(libc::SYS_openat, &args) as c_int }
    }

    /// # Safety
    /// `buf` is valid for `len` bytes.
    pub unsafe fn write(fd: c_int, buf: *const c_void, len: size_t) -> ssize_t {
        // SAFETY: forwarded from our caller's contract.
        unsafe {
            call(
                libc::SYS_write,
                &[fd as c_long, buf as c_long, len as c_long],
            ) as ssize_t
        }
    }

    /// # Safety
    /// `fd` is the library's own descriptor.
    pub unsafe fn close(fd: c_int) -> c_int {
        // SAFETY: forwarded from our caller's contract.
        unsafe { call(libc::SYS_close, &[fd as c_long]) as c_int }
    }

    /// This process's id (glibc's `getpid` is this system call).
    pub fn getpid() -> libc::pid_t {
        // SAFETY: getpid takes no argument.
        unsafe { call(libc::SYS_getpid, &[]) as libc::pid_t }
    }
}
#[cfg(target_os = "linux")]
pub use linux::{close, getpid, open, write};

/// This process's id.
#[cfg(target_os = "macos")]
pub fn getpid() -> libc::pid_t {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}
