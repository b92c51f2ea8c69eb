//! Linux's own hooks (its `hook_table!` lists them), beyond the shared ones
//! of `hooks.rs`: calls that act on a range of the caller's address space
//! and must therefore see queued ranges as the program left them.

use super::os::RealOs;
use super::real;
use super::signatures::{args, ret};
use crate::errno::{self, addr_result};
use crate::hooks::{on_range, protecting, ptr_result, span};
use crate::{trace, ENGINE};
use libc::{c_int, c_void, size_t};
use munmapq_core::engine::{Effect, Span};

/// # Safety
/// As for C `posix_madvise` (answers an error number, errno untouched).
/// Linux only: in macOS's libSystem `posix_madvise` is an alias of
/// `madvise` (scripts/libsystem_aliases.txt), so it cannot be interposed
/// apart from it.
pub unsafe fn posix_madvise(
    args::posix_madvise { addr, len, advice }: args::posix_madvise,
) -> ret::posix_madvise {
    let saved = errno::Saved::now();
    let r = ENGINE.advice_call(&RealOs, &[span(addr, len, Effect::Change)], || {
        // SAFETY: the caller's own arguments.
        match unsafe { real::posix_madvise(addr, len, advice) } {
            0 => Ok(0),
            e => Err(e),
        }
    });
    saved.restore();
    r.unwrap_or_else(|e| e)
}

/// # Safety
/// As for C `mlock2`.
pub unsafe fn mlock2(args::mlock2 { addr, len, flags }: args::mlock2) -> ret::mlock2 {
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Change, || unsafe {
        real::mlock2(addr, len, flags)
    })
}

/// # Safety
/// As for C `mremap`; `new_addr` is read only with `MREMAP_FIXED` or
/// `MREMAP_DONTUNMAP`.
pub unsafe fn mremap(
    args::mremap {
        old,
        old_size,
        new_size,
        flags,
        new_addr,
    }: args::mremap,
) -> ret::mremap {
    mremap_with(old, old_size, new_size, flags, new_addr, || {
        // SAFETY: the caller's own arguments.
        unsafe { real::mremap(old, old_size, new_size, flags, new_addr) }
    })
}

/// The `mremap` hook, the real call made by `call` (the C function, or
/// the raw system call for `syscall(SYS_mremap, ...)`).
pub(super) fn mremap_with(
    old: *mut c_void,
    old_size: size_t,
    new_size: size_t,
    flags: c_int,
    new_addr: *mut c_void,
    mut call: impl FnMut() -> *mut c_void,
) -> *mut c_void {
    let saved = errno::Saved::now();
    let base = old as usize;
    // The old range changes; where it may grow in place must be as free as
    // the program left it; a fixed target is replaced, and a target given
    // with `MREMAP_DONTUNMAP` alone is a hint the kernel takes where it is
    // free (Linux `mremap_to`), as an mmap's.
    let grow = (new_size > old_size)
        .then(|| {
            ENGINE.span(
                base.wrapping_add(old_size),
                new_size - old_size,
                Effect::Inspect,
            )
        })
        .flatten();
    let target = if flags & libc::MREMAP_FIXED != 0 {
        span(new_addr, new_size, Effect::Modify)
    } else if flags & libc::MREMAP_DONTUNMAP != 0 && !new_addr.is_null() {
        span(new_addr, new_size, Effect::Inspect)
    } else {
        None
    };
    let spans = [span(old, old_size, Effect::Modify), grow, target];
    trace::range(trace::KIND_MODIFY, base, old_size, 0);
    let r = ENGINE.range_call(&RealOs, &spans, || addr_result(call()));
    ptr_result(r, saved)
}

/// # Safety
/// As for C `pkey_mprotect`.
pub unsafe fn pkey_mprotect(
    args::pkey_mprotect {
        addr,
        len,
        prot,
        pkey,
    }: args::pkey_mprotect,
) -> ret::pkey_mprotect {
    // As mprotect: anything but read-only, or a protection key (which can
    // make reads fault), ends tracking; a mapping handed back later must
    // be as a fresh mmap would make it.
    let effect = protecting(prot == libc::PROT_READ && pkey == -1);
    // SAFETY: the caller's own arguments.
    on_range(addr, len, effect, || unsafe {
        real::pkey_mprotect(addr, len, prot, pkey)
    })
}

/// # Safety
/// As for C `mseal` (glibc may lack it; programs then use `syscall`, which
/// munmapq does not see).
pub unsafe fn mseal(args::mseal { addr, len, flags }: args::mseal) -> ret::mseal {
    // Queued mappings there are unmapped first (the kernel answers ENOMEM
    // for a freed range, as without munmapq, and nothing freed gets
    // pinned); a sealed mapping is never deferred (its munmap must fail
    // with EPERM), so live ones stop being tracked.
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Change, || unsafe {
        real::mseal(addr, len, flags)
    })
}

/// Above every user address on 64-bit Linux (47 or 56 bits on x86_64, at
/// most 52 on arm64).
pub(super) const ADDRESS_TOP: usize = 1 << 57;
const HUGE: usize = 1 << 30;

/// The size of SysV segment `id` (`IPC_STAT`: one system call, no
/// allocation), or None if it cannot be read.
fn segment_size(id: c_int) -> Option<usize> {
    // SAFETY: plain data, filled in by the kernel.
    let mut ds: libc::shmid_ds = unsafe { core::mem::zeroed() };
    // SAFETY: a valid out-pointer; a bad id only makes the call fail (the
    // system call glibc's shmctl makes on 64-bit targets).
    let r = unsafe {
        super::sys::call(
            libc::SYS_shmctl,
            &[
                id as libc::c_long,
                libc::IPC_STAT as libc::c_long,
                &mut ds as *mut libc::shmid_ds as libc::c_long,
            ],
        )
    };
    (r == 0).then_some(ds.shm_segsz as usize)
}

/// The boundary `SHM_RND` rounds down to: the kernel's `SHMLBA`, the page on
/// x86_64 (arch/x86/include/asm/shmparam.h), four pages on arm64
/// (arch/arm64/include/asm/shmparam.h); four pages elsewhere, which only
/// prepares a little more than needed.
fn shmlba() -> usize {
    let page = super::real::page_size();
    if cfg!(target_arch = "x86_64") {
        page
    } else {
        4 * page
    }
}

/// # Safety
/// As for C `shmat`.
pub unsafe fn shmat(args::shmat { id, addr, flags }: args::shmat) -> ret::shmat {
    let saved = errno::Saved::now();
    // SAFETY: the caller's own arguments.
    let call = || addr_result(unsafe { real::shmat(id, addr, flags) });
    let r = if addr.is_null() {
        // The kernel picks the address: anything we had there was unmapped
        // behind our back (as for an mmap without an address).
        let r = ENGINE.range_call(&RealOs, &[], call);
        if let Ok(start) = r {
            let len = segment_size(id).unwrap_or(ADDRESS_TOP.saturating_sub(start));
            ENGINE.placed_by_kernel(&RealOs, start, len);
        }
        r
    } else {
        ENGINE.range_call(&RealOs, &[attach_span(id, addr as usize, flags)], call)
    };
    ptr_result(r, saved).cast()
}

/// The range an attach at a fixed address covers. Without `SHM_REMAP` the
/// kernel refuses (EINVAL) if anything is mapped there, so queued mappings
/// are unmapped first; with it the attach replaces what is there, so live
/// mappings stop being tracked too. A segment whose size cannot be read is
/// taken to reach the top of the address space, and the end is rounded up
/// to a 1 GiB boundary (an `SHM_HUGETLB` segment covers whole huge pages):
/// both only unmap more of the queue than needed.
fn attach_span(id: c_int, addr: usize, flags: c_int) -> Option<Span> {
    let start = if flags & libc::SHM_RND != 0 {
        addr & !(shmlba() - 1)
    } else {
        addr
    };
    let effect = if flags & libc::SHM_REMAP != 0 {
        Effect::Modify
    } else {
        Effect::Inspect
    };
    let end = segment_size(id)
        .and_then(|l| start.checked_add(l))
        .and_then(|e| e.checked_add(HUGE - 1))
        .map_or(ADDRESS_TOP, |e| (e & !(HUGE - 1)).min(ADDRESS_TOP));
    span(start as *const c_void, end.saturating_sub(start), effect)
}
