//! The hooks every platform has (`shared_hooks!` lists them, with their C
//! signatures), once, each taking its `args::NAME` and answering its
//! `ret::NAME`; the platform's `exports` makes the dynamic loader call
//! them, and its own hooks (`linux/hooks.rs`, `macos/hooks.rs`) use the
//! helpers here.
//!
//! Each hook saves errno, lets the engine decide, and on success restores
//! errno (munmapq's own fstat/fcntl may have touched it; libc's wrappers
//! leave it alone on success), on failure sets the kernel's errno. mmap
//! and munmap first ask whether the call is plain (the engine's gate word
//! is zero, and the call passes straight by): then they make the real call
//! alone, and its errno is the answer. Every other way is a function out
//! of line, called last, so that the plain ways keep no frame (munmap's is
//! a jump to the real function).

use crate::errno::{self, int_result};
use crate::platform::os::RealOs;
use crate::platform::real;
use crate::platform::signatures::{args, ret};
use crate::trace::{self, Record};
use crate::ENGINE;
use libc::{c_int, c_void, size_t};
use munmapq_core::engine::{Effect, MmapWay, Span};
use munmapq_core::file::{trackable_open_flags, PATH_ONLY};
use munmapq_core::os::{Errno, Mmap, Os};

#[inline(always)]
pub(crate) fn ptr_result(r: Result<usize, Errno>, saved: errno::Saved) -> *mut c_void {
    match r {
        Ok(a) => {
            saved.restore();
            a as *mut c_void
        }
        Err(e) => {
            saved.set(e);
            libc::MAP_FAILED
        }
    }
}

#[inline(always)]
pub(crate) fn c_result(r: Result<c_int, Errno>, saved: errno::Saved) -> c_int {
    match r {
        Ok(v) => {
            saved.restore();
            v
        }
        Err(e) => {
            saved.set(e);
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
    on_range_of(addr, len, effect, false, call)
}

/// [`on_range`] for `madvise`, whose kernel answers EAGAIN where a split
/// found no room (`Engine::advice_call`).
pub(crate) fn on_advised_range(
    addr: *const c_void,
    len: size_t,
    call: impl FnMut() -> c_int,
) -> c_int {
    // madvise can split the mapping in the kernel: it stops being reusable.
    on_range_of(addr, len, Effect::Change, true, call)
}

fn on_range_of(
    addr: *const c_void,
    len: size_t,
    effect: Effect,
    advice: bool,
    call: impl FnMut() -> c_int,
) -> c_int {
    let saved = errno::Saved::now();
    let mut call = call;
    let spans = [span(addr, len, effect)];
    let r = if advice {
        ENGINE.advice_call(&RealOs, &spans, || int_result(call()))
    } else {
        ENGINE.range_call(&RealOs, &spans, || int_result(call()))
    };
    if trace::enabled() {
        let kind = match effect {
            Effect::Modify | Effect::Change => trace::KIND_MODIFY,
            Effect::Inspect => trace::KIND_INSPECT,
        };
        trace::range(kind, addr as usize, len, result_word(r.map(|v| v as usize)));
    }
    c_result(r, saved)
}

/// # Safety
/// As for C `mmap`.
#[inline(always)]
pub unsafe fn mmap(
    args::mmap {
        addr,
        len,
        prot,
        flags,
        fd,
        off,
    }: args::mmap,
) -> ret::mmap {
    let call = Mmap::new(addr as usize, len, prot, flags, fd, off);
    // SAFETY: the caller's own arguments.
    mmap_through(&RealOs, call, |c| unsafe {
        real::mmap(c.addr as *mut c_void, c.len, c.prot, c.flags, c.fd, c.off)
    })
}

/// The `mmap` hook, its real calls made through `os`, or by `plain` (the
/// real function, given the call's arguments: it captures nothing, so that
/// the ways out of line need no copy of them) where the engine says the
/// call is plain (`Engine::mmap_is_plain`): the real call alone, errno
/// left to it. macOS's `__mmap` hook passes the raw stubs.
#[inline(always)]
pub(crate) fn mmap_through<O: Os>(
    os: &O,
    call: Mmap,
    plain: impl FnOnce(Mmap) -> *mut c_void,
) -> *mut c_void {
    if ENGINE.mmap_is_plain(call) {
        return mmap_plainly(os, call, plain);
    }
    mmap_not_plain(
        os, call.addr, call.len, call.prot, call.flags, call.fd, call.off, plain,
    )
}

#[inline(always)]
fn mmap_plainly<O: Os>(os: &O, call: Mmap, plain: impl FnOnce(Mmap) -> *mut c_void) -> *mut c_void {
    let p = plain(call);
    ENGINE.mapped_plainly(os, call, p as usize);
    p
}

/// Out of the plain way: the same way where only the counters closed the
/// gate (the call counted), else the engine's. The call's arguments one by
/// one, so that the plain way keeps them in registers; and so that the
/// mmap the queue may answer passes on only its length, descriptor and
/// offset, the call is put together in memory only on the other ways.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn mmap_not_plain<O: Os>(
    os: &O,
    addr: usize,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
    plain: impl FnOnce(Mmap) -> *mut c_void,
) -> *mut c_void {
    let call = Mmap::new(addr, len, prot, flags, fd, off);
    if ENGINE.mmap_is_plain_counted(call) {
        return mmap_plainly(os, call, plain);
    }
    if trace::enabled() {
        return mmap_traced(os, addr, len, prot, flags, fd, off);
    }
    // Its way asks no system call: errno is saved after it.
    match ENGINE.mmap_way(call) {
        MmapWay::OfKind => {
            let saved = errno::Saved::now();
            ptr_result(os.framed(|| ENGINE.mmap_of_kind(os, len, fd, off)), saved)
        }
        way @ MmapWay::Straight(_) => {
            let saved = errno::Saved::now();
            ptr_result(ENGINE.mmap_by_way(os, call, way), saved)
        }
        way => mmap_by_way(os, addr, len, prot, flags, fd, off, way),
    }
}

/// An mmap that is not plain, at an address, while the payoff steps aside
/// or the engine is off: errno kept around the engine's own calls.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn mmap_by_way<O: Os>(
    os: &O,
    addr: usize,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
    way: MmapWay,
) -> *mut c_void {
    let saved = errno::Saved::now();
    let call = Mmap::new(addr, len, prot, flags, fd, off);
    ptr_result(ENGINE.mmap_by_way(os, call, way), saved)
}

/// `mmap_through` under `MUNMAPQ_TRACE`, each call written down. The
/// call's arguments one by one, as `mmap_by_way` takes them.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn mmap_traced<O: Os>(
    os: &O,
    addr: usize,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    let call = Mmap::new(addr, len, prot, flags, fd, off);
    let saved = errno::Saved::now();
    // What the engine would track, as a replay needs it (an `F_GETFL`
    // more per traced mmap).
    let identity = (call.fd >= 0)
        .then(|| os.file_facts(call.fd))
        .flatten()
        .filter(|_| trackable_open_flags(os.open_flags(call.fd), PATH_ONLY));
    let r = ENGINE.mmap(os, call);
    let (dev, ino) = identity.map_or((0, 0), |f| (f.dev, f.ino));
    trace::write(&Record {
        kind: trace::KIND_MMAP,
        addr: call.addr,
        len: call.len,
        prot: call.prot,
        flags: call.flags,
        fd: call.fd,
        dev,
        ino,
        off: call.off,
        result: result_word(r),
        ..Record::default()
    });
    ptr_result(r, saved)
}

/// # Safety
/// As for C `munmap`.
#[inline(always)]
pub unsafe fn munmap(args::munmap { addr, len }: args::munmap) -> ret::munmap {
    // SAFETY: the caller's own arguments.
    munmap_through(&RealOs, addr, len, |a, l| unsafe { real::munmap(a, l) })
}

/// The `munmap` hook, its real calls made through `os`, or by `plain`
/// where the engine says the call is plain (see `mmap_through`).
#[inline(always)]
pub(crate) fn munmap_through<O: Os>(
    os: &O,
    addr: *mut c_void,
    len: size_t,
    plain: impl FnOnce(*mut c_void, size_t) -> c_int,
) -> c_int {
    if ENGINE.munmap_is_plain(addr as usize, len) {
        return plain(addr, len);
    }
    munmap_not_plain(os, addr, len, plain)
}

/// Out of the plain way (see `mmap_not_plain`).
#[inline(never)]
fn munmap_not_plain<O: Os>(
    os: &O,
    addr: *mut c_void,
    len: size_t,
    plain: impl FnOnce(*mut c_void, size_t) -> c_int,
) -> c_int {
    if ENGINE.munmap_is_plain_counted(addr as usize, len) {
        return plain(addr, len);
    }
    munmap_engaged(os, addr, len)
}

/// A munmap that is not plain: errno kept around the engine's own calls.
#[inline(always)]
fn munmap_engaged<O: Os>(os: &O, addr: *mut c_void, len: size_t) -> c_int {
    if trace::enabled() {
        return munmap_traced(os, addr, len);
    }
    let saved = errno::Saved::now();
    c_result(ENGINE.munmap(os, addr as usize, len).map(|()| 0), saved)
}

/// `munmap_through` under `MUNMAPQ_TRACE`.
#[cold]
#[inline(never)]
fn munmap_traced<O: Os>(os: &O, addr: *mut c_void, len: size_t) -> c_int {
    let saved = errno::Saved::now();
    let rss = trace::current_rss();
    let r = ENGINE.munmap(os, addr as usize, len).map(|()| 0);
    trace::write(&Record {
        kind: trace::KIND_MUNMAP,
        addr: addr as usize,
        len,
        result: result_word(r.map(|_| 0)),
        rss,
        ..Record::default()
    });
    c_result(r, saved)
}

/// # Safety
/// As for C `mprotect`.
pub unsafe fn mprotect(args::mprotect { addr, len, prot }: args::mprotect) -> ret::mprotect {
    // SAFETY: the caller's own arguments.
    on_range(addr, len, protecting(prot == libc::PROT_READ), || unsafe {
        real::mprotect(addr, len, prot)
    })
}

/// What a change of protection to `read_only` (`PROT_READ` alone, no
/// protection key) or not does to a tracked range: making a tracked
/// mapping anything but read-only ends its tracking (it could be written);
/// PROT_READ again changes nothing, unless it may add PROT_EXEC (a
/// thread's READ_IMPLIES_EXEC).
pub(crate) fn protecting(read_only: bool) -> Effect {
    if read_only && !ENGINE.read_may_imply_exec() {
        Effect::Inspect
    } else {
        Effect::Change
    }
}

/// # Safety
/// As for C `madvise`.
pub unsafe fn madvise(args::madvise { addr, len, advice }: args::madvise) -> ret::madvise {
    // SAFETY: the caller's own arguments.
    on_advised_range(addr, len, || unsafe { real::madvise(addr, len, advice) })
}

/// # Safety
/// As for C `mlock`.
pub unsafe fn mlock(args::mlock { addr, len }: args::mlock) -> ret::mlock {
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Change, || unsafe {
        real::mlock(addr, len)
    })
}

/// # Safety
/// As for C `munlock`.
pub unsafe fn munlock(args::munlock { addr, len }: args::munlock) -> ret::munlock {
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Inspect, || unsafe {
        real::munlock(addr, len)
    })
}

/// # Safety
/// As for C `mlockall`.
pub unsafe fn mlockall(args::mlockall { flags }: args::mlockall) -> ret::mlockall {
    let saved = errno::Saved::now();
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
pub unsafe fn munlockall(args::munlockall {}: args::munlockall) -> ret::munlockall {
    let saved = errno::Saved::now();
    // SAFETY: no arguments.
    let r = ENGINE.unlock_all(|| int_result(unsafe { real::munlockall() }));
    c_result(r, saved)
}

/// # Safety
/// As for C `msync`.
pub unsafe fn msync(args::msync { addr, len, flags }: args::msync) -> ret::msync {
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Inspect, || unsafe {
        real::msync(addr, len, flags)
    })
}

/// # Safety
/// As for C `mincore`.
pub unsafe fn mincore(args::mincore { addr, len, vec }: args::mincore) -> ret::mincore {
    // SAFETY: the caller's own arguments.
    on_range(addr, len, Effect::Inspect, || unsafe {
        real::mincore(addr, len, vec)
    })
}
