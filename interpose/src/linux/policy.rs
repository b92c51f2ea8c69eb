//! Calls that give a range a memory policy or advice by other means than
//! `madvise`: `mbind` (libnuma's, a system call), `set_mempolicy_home_node`
//! (a system call only) and `process_madvise` (glibc 2.35+; on the
//! process itself, Linux 6.13+ takes any advice, `MADV_DONTFORK` and
//! `MADV_GUARD_INSTALL` among them). A queued mapping must never carry
//! such state into a reuse: the ranges they touch are released first, as
//! `madvise`'s are, and live mappings there stop being tracked.

use super::os::RealOs;
use super::real;
use super::signatures::{args, ret};
use crate::errno;
use crate::hooks::span;
use crate::ENGINE;
use libc::{c_long, c_void, ssize_t};
use munmapq_core::engine::{Effect, Span};
use munmapq_core::os::Errno;

/// `-1` + errno to `Err`, else the value.
fn long_result(r: c_long) -> Result<c_long, Errno> {
    if r == -1 {
        Err(errno::get())
    } else {
        Ok(r)
    }
}

/// A call changing the state of `spans`: released first, then `call`; its
/// result and errno are the kernel's (errno the caller's on success).
pub(super) fn changing(spans: &[Option<Span>], call: impl FnMut() -> c_long) -> c_long {
    let saved = errno::get();
    let mut call = call;
    match ENGINE.range_call(&RealOs, spans, || long_result(call())) {
        Ok(v) => {
            errno::set(saved);
            v
        }
        Err(e) => {
            errno::set(e);
            -1
        }
    }
}

/// The range `mbind` and `set_mempolicy_home_node` act on.
pub(super) fn policy_span(start: usize, len: usize) -> Option<Span> {
    span(start as *const c_void, len, Effect::Change)
}

/// A call on what `process_madvise` may act on: its ranges are behind the
/// program's pointer (read by the kernel, never here: a bad one must get
/// EFAULT), and the pidfd may name this process, so the whole address
/// space. The call is rare; it costs the queue and the tracking of live
/// mappings (`Engine::everything_call`). Result and errno as `changing`.
pub(super) fn changing_everything(call: impl FnMut() -> c_long) -> c_long {
    let saved = errno::get();
    let mut call = call;
    match ENGINE.everything_call(&RealOs, || long_result(call())) {
        Ok(v) => {
            errno::set(saved);
            v
        }
        Err(e) => {
            errno::set(e);
            -1
        }
    }
}

/// # Safety
/// As for libnuma's `mbind` (a system call; a program without libnuma
/// reaches the kernel through `syscall`, routed to the same place).
pub unsafe fn mbind(
    args::mbind {
        start,
        len,
        mode,
        nodemask,
        maxnode,
        flags,
    }: args::mbind,
) -> ret::mbind {
    changing(&[policy_span(start as usize, len as usize)], || {
        // SAFETY: the caller's own arguments.
        unsafe { real::mbind(start, len, mode, nodemask, maxnode, flags) }
    })
}

/// # Safety
/// As for C `process_madvise`.
pub unsafe fn process_madvise(
    args::process_madvise {
        pidfd,
        iov,
        n,
        advice,
        flags,
    }: args::process_madvise,
) -> ret::process_madvise {
    changing_everything(|| {
        // SAFETY: the caller's own arguments.
        unsafe { real::process_madvise(pidfd, iov, n, advice, flags) as c_long }
    }) as ssize_t
}
