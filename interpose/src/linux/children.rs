//! Linux: children made by glibc calls that run no atfork handler. A
//! child of `clone` that runs in this memory on a copy of the descriptor
//! table (`CLONE_VM` without `CLONE_FILES`, as a vfork child does) is
//! marked as one (`table_owner.rs`) where it keeps the caller's
//! thread-local storage (no `CLONE_SETTLS`), so that its hooks neither use
//! nor change the records of the parent's table.

use super::real;
use libc::{c_int, c_void, pid_t};

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
pub unsafe extern "C" fn _Fork() -> pid_t {
    // SAFETY: no arguments.
    unsafe { real::_Fork() }
}
