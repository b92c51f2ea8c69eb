//! Linux: the calls after which the process's open file descriptions may
//! be held elsewhere too (a child inherits them; a descriptor is passed
//! over a socket or copied with `pidfd_getfd`), so that a lock may be
//! taken on one of them through a copy no hook sees. Each tells the engine
//! (`Engine::descriptions_shared`, one atomic add), whose close hooks then
//! ask the kernel about a description's locks (`proc.rs`) until its
//! number is closed again (`core/src/fresh_fds.rs`). `fork` tells it from
//! the atfork handler, `vfork` from its trampoline (`table_owner.rs`);
//! glibc's `clone` and `_Fork`, which run no atfork handler, from their
//! hooks here. A `clone` child that runs in this memory on a copy of the
//! descriptor table (`CLONE_VM` without `CLONE_FILES`, as a vfork child
//! does) is marked as one (`table_owner.rs`) where it keeps the caller's
//! thread-local storage (no `CLONE_SETTLS`).
//!
//! A child that gets a copy of this memory without the atfork handlers
//! (`_Fork`, `clone` without `CLONE_VM`, `fork` or such a `clone` through
//! `syscall`) is preceded by the unmap of the queue those handlers make
//! (`Engine::before_copy`). Not `clone3` through `syscall`: its flags are
//! in a structure in memory, not read here.

use super::os::RealOs;
use super::real;
use crate::ENGINE;
use libc::{c_char, c_int, c_uint, c_void, mmsghdr, msghdr, pid_t, ssize_t, timespec, FILE};
use libc::{posix_spawn_file_actions_t, posix_spawnattr_t};

/// # Safety
/// As for C `posix_spawn`.
#[inline(always)]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut pid_t,
    path: *const c_char,
    actions: *const posix_spawn_file_actions_t,
    attr: *const posix_spawnattr_t,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    ENGINE.descriptions_shared();
    // SAFETY: the caller's own arguments.
    unsafe { real::posix_spawn(pid, path, actions, attr, argv, envp) }
}

/// # Safety
/// As for C `posix_spawnp`.
#[inline(always)]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut pid_t,
    file: *const c_char,
    actions: *const posix_spawn_file_actions_t,
    attr: *const posix_spawnattr_t,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    ENGINE.descriptions_shared();
    // SAFETY: the caller's own arguments.
    unsafe { real::posix_spawnp(pid, file, actions, attr, argv, envp) }
}

/// # Safety
/// As for C `system` (glibc spawns the shell itself, past the hooks).
#[inline(always)]
pub unsafe extern "C" fn system(command: *const c_char) -> c_int {
    ENGINE.descriptions_shared();
    // SAFETY: the caller's own arguments.
    unsafe { real::system(command) }
}

/// # Safety
/// As for C `popen` (glibc spawns the shell itself, past the hooks).
#[inline(always)]
pub unsafe extern "C" fn popen(command: *const c_char, mode: *const c_char) -> *mut FILE {
    ENGINE.descriptions_shared();
    // SAFETY: the caller's own arguments.
    unsafe { real::popen(command, mode) }
}

/// # Safety
/// As for C `sendmsg`. Told after a call that succeeded with control data
/// (the kernel has read the header, so it is readable): no description
/// can be locked through the copy before the receiver has it.
#[inline(always)]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    // SAFETY: the caller's own arguments.
    let r = unsafe { real::sendmsg(fd, msg, flags) };
    // SAFETY: the call succeeded, so `msg` is a readable header.
    if r >= 0 && unsafe { (*msg).msg_controllen } > 0 {
        ENGINE.descriptions_shared();
    }
    r
}

/// # Safety
/// As for C `recvmsg`: descriptors received (SCM_RIGHTS) name
/// descriptions the sender holds too.
#[inline(always)]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    // SAFETY: the caller's own arguments.
    let r = unsafe { real::recvmsg(fd, msg, flags) };
    // SAFETY: the call succeeded, so the kernel wrote `msg`'s header.
    if r >= 0 && unsafe { (*msg).msg_controllen } > 0 {
        ENGINE.descriptions_shared();
    }
    r
}

/// Whether any of the first `n` headers of `vec` carries control data.
///
/// # Safety
/// `vec` holds `n` headers the kernel has just read or written.
unsafe fn any_control(vec: *const mmsghdr, n: c_int) -> bool {
    // SAFETY: as the caller vouches.
    (0..n.max(0) as usize).any(|i| unsafe { (*vec.add(i)).msg_hdr.msg_controllen } > 0)
}

/// # Safety
/// As for C `sendmmsg` (see `sendmsg`).
#[inline(always)]
pub unsafe extern "C" fn sendmmsg(
    fd: c_int,
    vec: *mut mmsghdr,
    vlen: c_uint,
    flags: c_int,
) -> c_int {
    // SAFETY: the caller's own arguments.
    let r = unsafe { real::sendmmsg(fd, vec, vlen, flags) };
    // SAFETY: the kernel read the first `r` headers.
    if r > 0 && unsafe { any_control(vec, r) } {
        ENGINE.descriptions_shared();
    }
    r
}

/// # Safety
/// As for C `recvmmsg` (see `recvmsg`).
#[inline(always)]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    vec: *mut mmsghdr,
    vlen: c_uint,
    flags: c_int,
    timeout: *mut timespec,
) -> c_int {
    // SAFETY: the caller's own arguments.
    let r = unsafe { real::recvmmsg(fd, vec, vlen, flags, timeout) };
    // SAFETY: the kernel wrote the first `r` headers.
    if r > 0 && unsafe { any_control(vec, r) } {
        ENGINE.descriptions_shared();
    }
    r
}

/// # Safety
/// As for C `pidfd_getfd`: the copy names a description another process
/// (or this one, through another number) holds.
#[inline(always)]
pub unsafe extern "C" fn pidfd_getfd(pidfd: c_int, fd: c_int, flags: c_uint) -> c_int {
    // SAFETY: the caller's own arguments.
    let r = unsafe { real::pidfd_getfd(pidfd, fd, flags) };
    if r >= 0 {
        ENGINE.descriptions_shared();
    }
    r
}

/// Whether `syscall(nr, ...)` may share descriptions (see the module's
/// text): told before it, whatever it answers.
pub(super) fn shares_descriptions(nr: libc::c_long) -> bool {
    #[cfg(target_arch = "x86_64")]
    if nr == libc::SYS_fork || nr == libc::SYS_vfork {
        return true;
    }
    matches!(
        nr,
        libc::SYS_clone
            | libc::SYS_clone3
            | libc::SYS_pidfd_getfd
            | libc::SYS_sendmsg
            | libc::SYS_recvmsg
            | libc::SYS_sendmmsg
            | libc::SYS_recvmmsg
    )
}

/// Before a call that makes a child with a copy of this memory and runs
/// no atfork handler: what the program gave up is unmapped, so that the
/// kernel neither copies it nor tears it down again in the child. errno
/// as it was.
pub(super) fn copy_coming() {
    let saved = crate::errno::get();
    ENGINE.before_copy(&RealOs);
    crate::errno::set(saved);
}

/// Whether `syscall(nr, a1, ...)` makes a child with a copy of this
/// memory (a fork; a clone without `CLONE_VM`, whose flags are the first
/// argument on every 64-bit ABI). Not `vfork`, which shares it.
pub(super) fn copies_memory(nr: libc::c_long, a1: libc::c_long) -> bool {
    #[cfg(target_arch = "x86_64")]
    if nr == libc::SYS_fork {
        return true;
    }
    nr == libc::SYS_clone && a1 & libc::CLONE_VM as libc::c_long == 0
}

/// # Safety
/// As for glibc's `clone` (variadic after `arg`: `ptid`, `tls` and `ctid`
/// travel as fixed arguments would on the 64-bit ABIs munmapq builds for;
/// the real function reads them only where `flags` asks).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clone(
    f: *mut c_void,
    stack: *mut c_void,
    flags: c_int,
    arg: *mut c_void,
    ptid: *mut pid_t,
    tls: *mut c_void,
    ctid: *mut pid_t,
) -> c_int {
    if flags & libc::CLONE_VM == 0 {
        copy_coming();
    }
    if flags & libc::CLONE_FILES == 0 {
        ENGINE.descriptions_shared();
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        if flags & libc::CLONE_VM != 0 && flags & libc::CLONE_SETTLS == 0 {
            super::table_owner::child_in_this_memory();
        }
    }
    // SAFETY: the caller's own arguments.
    unsafe { real::clone(f, stack, flags, arg, ptid, tls, ctid) }
}

/// # Safety
/// As for glibc's `_Fork`.
#[inline(always)]
#[allow(non_snake_case)]
pub unsafe extern "C" fn _Fork() -> pid_t {
    copy_coming();
    ENGINE.descriptions_shared();
    // SAFETY: no arguments.
    unsafe { real::_Fork() }
}
