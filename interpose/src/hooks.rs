//! The hooked functions, once, with C signatures. The platform layers
//! (`exports_linux.rs`, `exports_macos.rs`) only publish them, from the
//! lists in [`common_hooks!`] and their own extras.
//!
//! Each hook saves errno, lets the engine decide, and on success restores
//! errno (munmapq's own fstat/fcntl may have touched it; libc's wrappers
//! leave it alone on success), on failure sets the kernel's errno.

use crate::os::{int_result, RealOs};
use crate::trace::{self, Record};
use crate::{errno, real, ENGINE};
use libc::{c_int, c_void, off_t, size_t};
use munmapq_core::engine::{Effect, Span};
use munmapq_core::os::{Errno, Os};

/// Records the hook's frame for the longjmp recovery while it runs (Linux,
/// `frames.rs`): the first statement of every hook.
macro_rules! hook_frame {
    () => {
        #[cfg(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        let here = 0u8;
        #[cfg(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        let _frame = crate::frames::Frame::enter(core::ptr::addr_of!(here) as usize);
    };
}
#[cfg(target_os = "linux")] // used by hooks_linux.rs
pub(crate) use hook_frame;

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

pub(crate) fn ptr_result(r: Result<usize, Errno>, saved: c_int) -> *mut c_void {
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

pub(crate) fn c_result(r: Result<c_int, Errno>, saved: c_int) -> c_int {
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

/// A result as a trace word: the value, or `-errno`.
fn result_word(r: Result<usize, Errno>) -> i64 {
    match r {
        Ok(v) => v as i64,
        Err(e) => -(e as i64),
    }
}

pub(crate) fn span(addr: *const c_void, len: size_t, effect: Effect) -> Option<Span> {
    ENGINE.span(addr as usize, len, effect)
}

/// A call on one range that answers `-1` + errno.
pub(crate) fn on_range(
    addr: *const c_void,
    len: size_t,
    effect: Effect,
    call: impl FnMut() -> c_int,
) -> c_int {
    let saved = errno::get();
    let mut call = call;
    let r = ENGINE.range_call(&RealOs, &[span(addr, len, effect)], || int_result(call()));
    if trace::enabled() {
        let kind = match effect {
            Effect::Modify => trace::KIND_MODIFY,
            Effect::Inspect => trace::KIND_INSPECT,
        };
        trace::range(kind, addr as usize, len, result_word(r.map(|v| v as usize)));
    }
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
    hook_frame!();
    let saved = errno::get();
    let identity = (trace::enabled() && fd >= 0)
        .then(|| RealOs.readable_file(fd))
        .flatten();
    let r = ENGINE.mmap(&RealOs, addr as usize, len, prot, flags, fd, off);
    if trace::enabled() {
        let (dev, ino) = identity.map_or((0, 0), |f| (f.dev, f.ino));
        trace::write(&Record {
            kind: trace::KIND_MMAP,
            addr: addr as usize,
            len,
            prot,
            flags,
            fd,
            dev,
            ino,
            off,
            result: result_word(r),
            ..Record::default()
        });
    }
    ptr_result(r, saved)
}

/// # Safety
/// As for C `munmap`.
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    hook_frame!();
    let saved = errno::get();
    let peak_rss = if trace::enabled() {
        trace::peak_rss()
    } else {
        0
    };
    let r = ENGINE.munmap(&RealOs, addr as usize, len).map(|()| 0);
    if trace::enabled() {
        trace::write(&Record {
            kind: trace::KIND_MUNMAP,
            addr: addr as usize,
            len,
            result: result_word(r.map(|_| 0)),
            peak_rss,
            ..Record::default()
        });
    }
    c_result(r, saved)
}

/// # Safety
/// As for C `mprotect`.
pub unsafe extern "C" fn mprotect(addr: *mut c_void, len: size_t, prot: c_int) -> c_int {
    hook_frame!();
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
    hook_frame!();
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
    hook_frame!();
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
    hook_frame!();
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Modify, || unsafe {
        real::mlock(addr, len)
    })
}

/// # Safety
/// As for C `munlock`.
pub unsafe extern "C" fn munlock(addr: *const c_void, len: size_t) -> c_int {
    hook_frame!();
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Inspect, || unsafe {
        real::munlock(addr, len)
    })
}

/// # Safety
/// As for C `mlockall`.
pub unsafe extern "C" fn mlockall(flags: c_int) -> c_int {
    hook_frame!();
    let saved = errno::get();
    let future = flags & libc::MCL_FUTURE != 0;
    let r = ENGINE.lock_all(&RealOs, future, || {
        // SAFETY: the caller's own arguments.
        int_result(unsafe { real::mlockall(flags) })
    });
    if trace::enabled() {
        trace::write(&Record {
            kind: trace::KIND_LOCK_ALL,
            flags,
            result: result_word(r.map(|v| v as usize)),
            ..Record::default()
        });
    }
    c_result(r, saved)
}

/// # Safety
/// As for C `munlockall`.
pub unsafe extern "C" fn munlockall() -> c_int {
    hook_frame!();
    let saved = errno::get();
    // SAFETY: no arguments.
    let r = ENGINE.unlock_all(|| int_result(unsafe { real::munlockall() }));
    c_result(r, saved)
}

/// # Safety
/// As for C `msync`.
pub unsafe extern "C" fn msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int {
    hook_frame!();
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Inspect, || unsafe {
        real::msync(addr, len, flags)
    })
}

/// # Safety
/// As for C `mincore`.
pub unsafe extern "C" fn mincore(addr: *mut c_void, len: size_t, vec: *mut c_void) -> c_int {
    hook_frame!();
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Inspect, || unsafe {
        real::mincore(addr, len, vec)
    })
}

/// # Safety
/// As for C `mlock2`.
#[cfg(target_os = "linux")]
pub unsafe extern "C" fn mlock2(addr: *const c_void, len: size_t, flags: libc::c_uint) -> c_int {
    hook_frame!();
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
    hook_frame!();
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
    trace::range(trace::KIND_MODIFY, base, old_size, 0);
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

#[cfg(target_os = "macos")]
include!("hooks_macos.rs");
