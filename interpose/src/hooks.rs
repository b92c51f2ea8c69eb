//! The hooked functions, once, with C signatures. The platform layers
//! (`exports_linux.rs`, `exports_macos.rs`) only publish them, from the
//! lists in [`common_hooks!`] and their own extras.
//!
//! Each hook saves errno, lets the engine decide, and on success restores
//! errno (munmapq's own fstat/fcntl may have touched it; libc's wrappers
//! leave it alone on success), on failure sets the kernel's errno.

use crate::os::{int_result, RealOs};
use crate::{errno, real, ENGINE};
use libc::{c_int, c_void, off_t, size_t};
use munmapq_core::engine::{Effect, Errno, Span};

/// Invokes `$m!` with the hooks every platform has: name, C arguments and
/// C return type. macOS's interpose table and Linux's exports are both
/// generated from this one list.
#[macro_export]
macro_rules! common_hooks {
    ($m:ident) => {
        $m! {
            mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void;
            munmap(addr: *mut c_void, len: size_t) -> c_int;
            mprotect(addr: *mut c_void, len: size_t, prot: c_int) -> c_int;
            madvise(addr: *mut c_void, len: size_t, advice: c_int) -> c_int;
            mlock(addr: *const c_void, len: size_t) -> c_int;
            munlock(addr: *const c_void, len: size_t) -> c_int;
            mlockall(flags: c_int) -> c_int;
            munlockall() -> c_int;
            msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int;
            mincore(addr: *mut c_void, len: size_t, vec: *mut c_void) -> c_int;
        }
    };
}

fn ptr_result(r: Result<usize, Errno>, saved: c_int) -> *mut c_void {
    match r {
        Ok(a) => {
            errno::set(saved);
            a as *mut c_void
        }
        Err(e) => {
            errno::set(e);
            libc::MAP_FAILED
        }
    }
}

fn c_result(r: Result<c_int, Errno>, saved: c_int) -> c_int {
    match r {
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

fn span(addr: *const c_void, len: size_t, effect: Effect) -> Option<Span> {
    ENGINE.span(addr as usize, len, effect)
}

/// A call on one range that answers `-1` + errno.
fn on_range(
    addr: *const c_void,
    len: size_t,
    effect: Effect,
    call: impl FnMut() -> c_int,
) -> c_int {
    let saved = errno::get();
    let mut call = call;
    let r = ENGINE.range_call(&RealOs, &[span(addr, len, effect)], || int_result(call()));
    c_result(r, saved)
}

/// # Safety
/// As for C `mmap`.
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    let saved = errno::get();
    let r = ENGINE.mmap(&RealOs, addr as usize, len, prot, flags, fd, off);
    ptr_result(r, saved)
}

/// # Safety
/// As for C `munmap`.
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    let saved = errno::get();
    c_result(
        ENGINE.munmap(&RealOs, addr as usize, len).map(|()| 0),
        saved,
    )
}

/// # Safety
/// As for C `mprotect`.
pub unsafe extern "C" fn mprotect(addr: *mut c_void, len: size_t, prot: c_int) -> c_int {
    // Making a tracked mapping anything but read-only ends its tracking
    // (it could be written); PROT_READ again changes nothing.
    let effect = if prot == libc::PROT_READ {
        Effect::Inspect
    } else {
        Effect::Modify
    };
    // SAFETY: the caller's own arguments.
    on_range(addr, len, effect, || unsafe {
        real::mprotect(addr, len, prot)
    })
}

/// # Safety
/// As for C `madvise`.
pub unsafe extern "C" fn madvise(addr: *mut c_void, len: size_t, advice: c_int) -> c_int {
    // madvise can split the mapping in the kernel: it stops being reusable.
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Modify, || unsafe {
        real::madvise(addr, len, advice)
    })
}

/// # Safety
/// As for C `posix_madvise` (answers an error number, errno untouched).
/// Linux only: in macOS's libSystem `posix_madvise` is an alias of
/// `madvise` (scripts/libsystem_aliases.txt), so it cannot be interposed
/// apart from it.
#[cfg(target_os = "linux")]
pub unsafe extern "C" fn posix_madvise(addr: *mut c_void, len: size_t, advice: c_int) -> c_int {
    let saved = errno::get();
    let r = ENGINE.range_call(&RealOs, &[span(addr, len, Effect::Modify)], || {
        // SAFETY: the caller's own arguments.
        match unsafe { real::posix_madvise(addr, len, advice) } {
            0 => Ok(0),
            e => Err(e),
        }
    });
    errno::set(saved);
    r.unwrap_or_else(|e| e)
}

/// # Safety
/// As for C `mlock`.
pub unsafe extern "C" fn mlock(addr: *const c_void, len: size_t) -> c_int {
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Modify, || unsafe {
        real::mlock(addr, len)
    })
}

/// # Safety
/// As for C `munlock`.
pub unsafe extern "C" fn munlock(addr: *const c_void, len: size_t) -> c_int {
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Inspect, || unsafe {
        real::munlock(addr, len)
    })
}

/// # Safety
/// As for C `mlockall`.
pub unsafe extern "C" fn mlockall(flags: c_int) -> c_int {
    let saved = errno::get();
    let future = flags & libc::MCL_FUTURE != 0;
    // SAFETY: the caller's own arguments.
    let r = ENGINE.lock_all(&RealOs, future, || {
        int_result(unsafe { real::mlockall(flags) })
    });
    c_result(r, saved)
}

/// # Safety
/// As for C `munlockall`.
pub unsafe extern "C" fn munlockall() -> c_int {
    ENGINE.unlock_all();
    // SAFETY: no arguments.
    unsafe { real::munlockall() }
}

/// # Safety
/// As for C `msync`.
pub unsafe extern "C" fn msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int {
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Inspect, || unsafe {
        real::msync(addr, len, flags)
    })
}

/// # Safety
/// As for C `mincore`.
pub unsafe extern "C" fn mincore(addr: *mut c_void, len: size_t, vec: *mut c_void) -> c_int {
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Inspect, || unsafe {
        real::mincore(addr, len, vec)
    })
}

/// # Safety
/// As for C `mlock2`.
#[cfg(target_os = "linux")]
pub unsafe extern "C" fn mlock2(addr: *const c_void, len: size_t, flags: libc::c_uint) -> c_int {
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Modify, || unsafe {
        real::mlock2(addr, len, flags)
    })
}

/// # Safety
/// As for C `mremap`; `new_addr` is read only with `MREMAP_FIXED`.
#[cfg(target_os = "linux")]
pub unsafe extern "C" fn mremap(
    old: *mut c_void,
    old_size: size_t,
    new_size: size_t,
    flags: c_int,
    new_addr: *mut c_void,
) -> *mut c_void {
    let saved = errno::get();
    let base = old as usize;
    // The old range changes; where it may grow in place must be as free as
    // the program left it; a fixed target is replaced.
    let grow = (new_size > old_size)
        .then(|| {
            ENGINE.span(
                base.wrapping_add(old_size),
                new_size - old_size,
                Effect::Inspect,
            )
        })
        .flatten();
    let target = (flags & libc::MREMAP_FIXED != 0)
        .then(|| span(new_addr, new_size, Effect::Modify))
        .flatten();
    let spans = [span(old, old_size, Effect::Modify), grow, target];
    let r = ENGINE.range_call(&RealOs, &spans, || {
        // SAFETY: the caller's own arguments.
        let p = unsafe { real::mremap(old, old_size, new_size, flags, new_addr) };
        if p == libc::MAP_FAILED {
            Err(errno::get())
        } else {
            Ok(p as usize)
        }
    });
    ptr_result(r, saved)
}
