//! Linux: children made by glibc calls that run no atfork handler. A
//! child of `clone` that runs in this memory on a copy of the descriptor
//! table (`CLONE_VM` without `CLONE_FILES`, as a vfork child does) is
//! marked as one (`table_owner.rs`) where it keeps the caller's
//! thread-local storage (no `CLONE_SETTLS`), so that its hooks neither use
//! nor change the records of the parent's table.
//!
//! A child that gets a copy of this memory without the atfork handlers
//! (`_Fork`, `clone` without `CLONE_VM`, `fork` or such a `clone` through
//! `syscall`) is preceded by the unmap of the queue those handlers make
//! (`Engine::before_copy`); where the child comes back through the hook
//! (not a `clone` child, which runs its function on a stack of its own) it
//! gets what the atfork child handler gives a fork child. Not `clone3`
//! through `syscall`: its flags are in a structure in memory, not read
//! here.

use super::os::RealOs;
use super::real;
use super::signatures::{args, ret};
use crate::ENGINE;

/// Before a call that makes a child with a copy of this memory and runs
/// no atfork handler: what the program gave up is unmapped, so that the
/// kernel neither copies it nor tears it down again in the child. errno
/// as it was.
pub(super) fn copy_coming() {
    let saved = crate::errno::get();
    ENGINE.before_copy(&RealOs);
    crate::errno::set(saved);
}

/// In a child made by a call that runs no atfork handler, on the stack
/// that made the call (`_Fork`, `fork` or `clone` without a new stack
/// through `syscall`): what the atfork child handler does in a fork child
/// (counters of its own, the table and its records as a child's), errno
/// as it was.
pub(super) fn copy_made() {
    let saved = crate::errno::get();
    crate::init::after_fork_in_child();
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
pub unsafe fn clone(
    args::clone {
        f,
        stack,
        flags,
        arg,
        ptid,
        tls,
        ctid,
    }: args::clone,
) -> ret::clone {
    if flags & libc::CLONE_VM == 0 {
        copy_coming();
    }
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    if flags & libc::CLONE_FILES == 0
        && flags & libc::CLONE_VM != 0
        && flags & libc::CLONE_SETTLS == 0
    {
        super::table_owner::child_in_this_memory();
    }
    // SAFETY: the caller's own arguments.
    unsafe { real::clone(f, stack, flags, arg, ptid, tls, ctid) }
}

/// # Safety
/// As for glibc's `_Fork`.
#[inline(always)]
#[allow(non_snake_case)]
pub unsafe fn _Fork(args::_Fork {}: args::_Fork) -> ret::_Fork {
    copy_coming();
    // SAFETY: no arguments.
    let pid = unsafe { real::_Fork() };
    if pid == 0 {
        copy_made();
    }
    pid
}
