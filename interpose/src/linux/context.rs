//! Linux's hooks on what the kernel takes from an mmap call's context
//! besides the file (the decisions: the core's `context.rs`): a mount's
//! flags changed in place (`mount` with `MS_REMOUNT`, `mount_setattr`) and
//! the calling thread's personality (`READ_IMPLIES_EXEC`). Each is rare;
//! none changes what the call returns or its errno.
//!
//! What no hook sees: these calls made with the `syscall` instruction
//! itself, and a remount by another process (a mount's flags are the
//! mount namespace's, not the process's): there a window queued before it
//! keeps the exec permission the old flags gave (see docs/guarantees.md).

use super::real;
use super::signatures::{args, ret};
use super::sys;
use crate::ENGINE;
use libc::c_long;

/// What `personality` takes to only ask (the kernel reads an unsigned
/// int, `kernel/exec_domain.c`).
const QUERY: u32 = 0xffff_ffff;
/// `READ_IMPLIES_EXEC` (`include/uapi/linux/personality.h`).
const READ_IMPLIES_EXEC: c_long = 0x0040_0000;

/// The calling thread's personality (the raw call: errno untouched).
fn current() -> Option<c_long> {
    // SAFETY: a query changes nothing and takes no pointer.
    let r = unsafe { sys::call(libc::SYS_personality, &[QUERY as c_long]) };
    (r >= 0).then_some(r)
}

/// Whether a `PROT_READ` mmap by the calling thread becomes executable.
pub fn read_implies_exec() -> Option<bool> {
    current().map(|p| p & READ_IMPLIES_EXEC != 0)
}

/// # Safety
/// As for C `mount`.
#[inline(always)]
pub unsafe fn mount(
    args::mount {
        src,
        target,
        fstype,
        flags,
        data,
    }: args::mount,
) -> ret::mount {
    // SAFETY: the caller's own arguments.
    let r = unsafe { real::mount(src, target, fstype, flags, data) };
    ENGINE.mounts_changed();
    r
}

/// # Safety
/// As for C `mount_setattr`.
#[inline(always)]
pub unsafe fn mount_setattr(
    args::mount_setattr {
        dir,
        path,
        flags,
        attr,
        size,
    }: args::mount_setattr,
) -> ret::mount_setattr {
    // SAFETY: the caller's own arguments.
    let r = unsafe { real::mount_setattr(dir, path, flags, attr, size) };
    ENGINE.mounts_changed();
    r
}

/// # Safety
/// As for C `personality`.
#[inline(always)]
pub unsafe fn personality(args::personality { persona }: args::personality) -> ret::personality {
    // Before the call, so that no mmap of this thread (a signal handler's
    // included) runs under the new personality with the old word.
    if persona as u32 != QUERY
        && current().is_none_or(|now| (now ^ persona as c_long) & READ_IMPLIES_EXEC != 0)
    {
        ENGINE.personalities_split();
    }
    // SAFETY: the caller's own argument.
    unsafe { real::personality(persona) }
}
