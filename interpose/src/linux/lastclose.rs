//! Linux's hooks on the calls that end an open file or a file's name (the
//! decisions: the core's `engine/fds.rs`). Each lets the engine release
//! first, then makes the real call with the caller's errno put back, so
//! its result and errno are the kernel's. A call that ends descriptions
//! tells the engine again once it returns (`Engine::closed`), with whether
//! it closed anything: what `F_GETFL` said of those numbers may be asked
//! again (`core/src/readonly_fds.rs`), and a call that failed without closing
//! anything (a bad source descriptor, bad flags) gives the descriptor back
//! what the engine took from it before the call. `unshare(CLONE_FILES)`
//! and `close_range(CLOSE_RANGE_UNSHARE)` tell `table_owner.rs` that the
//! process's threads may no longer share one table.

use super::os::RealOs;
use super::real;
use super::shm::{shm_path, ShmPath};
use super::signatures::{args, ret};
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
use super::table_owner::{self, lane_open};
use crate::{errno, ENGINE};
use libc::{c_char, c_int, c_long, c_uint, FILE};
use munmapq_core::engine::Closing;

/// The engine's work before a call, errno kept as the caller left it.
#[inline(always)]
fn before<T>(work: impl FnOnce() -> T) -> T {
    let saved = errno::Saved::now();
    let r = work();
    saved.restore();
    r
}

/// What [`ENGINE`] does before a call that ends the descriptors
/// `[lo, hi]`; hand its answer to [`closed`]. errno is kept (see
/// `Engine::closing`).
#[inline(always)]
fn closing(lo: c_int, hi: c_int) -> Closing {
    ENGINE.closing(&RealOs, lo, hi)
}

/// After that call: `ok` unless it failed without closing anything.
/// The caller's errno (the call's) is kept: the engine makes no calls of
/// its own there.
#[inline(always)]
fn closed(c: Closing, ok: bool) {
    // Two calls, so that a close that closed (the common way) inlines
    // without the failed one's work.
    if ok {
        ENGINE.closed(c, true);
    } else {
        ENGINE.closed(c, false);
    }
    if crate::trace::enabled() {
        trace_closed(c, ok);
    }
}

#[cold]
#[inline(never)]
fn trace_closed(c: Closing, ok: bool) {
    if let Some((lo, hi)) = c.fds() {
        crate::trace::write(&crate::trace::Record {
            kind: munmapq_core::trace::KIND_CLOSE,
            fd: lo,
            off: hi as i64,
            result: if ok { 0 } else { -1 },
            ..Default::default()
        });
    }
}

/// Whether a failed `close` closed nothing: only EBADF says so (Linux
/// frees the number before anything else can fail, `fs/open.c`).
fn close_failed_with_nothing_closed(r: c_int) -> bool {
    r != 0 && errno::get() == libc::EBADF
}

const PTHREAD_CANCEL_DISABLE: c_int = 1;

/// Runs `call`, which makes a close that is a cancellation point at its
/// entry (`close`), so that a cancellation is acted on where it leaves the
/// engine's records as the kernel leaves the descriptor: at the entry,
/// before the engine changes anything (glibc acts on a pending request
/// before the system call, and the descriptor stays open); a request
/// that comes while the engine and the real close run waits for the
/// thread's next cancellation point, as one that came just after the
/// system call would. No unwinding passes through a frame of the
/// library's that holds anything (the table is never held here).
fn cancel_at_entry<T>(call: impl FnOnce() -> T) -> T {
    // glibc's cancellation point: it unwinds out of this frame only here,
    // before anything was changed. Neither call touches errno.
    real::testcancel();
    let old = real::setcancelstate(PTHREAD_CANCEL_DISABLE);
    let r = call();
    real::setcancelstate(old);
    r
}

/// Where no thread-local word is kept (`table_owner.rs`), every thread
/// counts as on the process's table: the lane is open while glibc says
/// one thread and nothing is traced.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn lane_open() -> bool {
    real::single_threaded() && !crate::trace::enabled()
}

/// # Safety
/// As for C `close`.
#[inline(always)]
pub unsafe fn close(args::close { fd }: args::close) -> ret::close {
    // The common close: no records, no cancellation to act on (see
    // `cancellable`), nothing to trace. Told here, with no frame: the
    // way out of line keeps what it needs across the real call.
    if lane_open() && ENGINE.close_lane_may_take(fd) {
        return close_in_lane(fd);
    }
    close_whole(fd)
}

/// The common close, its number told to have a place of its own.
#[inline(never)]
fn close_in_lane(fd: c_int) -> c_int {
    if let Some(place) = ENGINE.close_lane(fd) {
        // SAFETY: the caller's own arguments.
        let r = unsafe { real::close(fd) };
        ENGINE.closed_lane(fd, place);
        return r;
    }
    close_whole(fd)
}

/// A close other than the common one.
#[inline(never)]
fn close_whole(fd: c_int) -> c_int {
    if cancellable(fd) {
        return close_cancelling_at_entry(fd);
    }
    close_now(fd)
}

/// Whether a close of `fd` is made so that a cancellation cannot leave
/// the engine's records wrong: it has records a close that did not happen
/// needs back, or the process has had a second thread. Even with no
/// records, a close that began and never returned would leave its place
/// in line under way (`core/src/close_seq.rs`), and no later mapping
/// through its number (through any number, for those sharing a place
/// past the first 4096) would be tracked again. While glibc says the
/// process never had a second thread (`real::single_threaded`), its
/// `close` and `write` act on no cancellation (since 2.36).
#[inline(always)]
fn cancellable(fd: c_int) -> bool {
    ENGINE.fd_has_records(fd) || !real::single_threaded()
}

/// `close(fd)` with the engine told before and after.
#[inline(always)]
fn close_now(fd: c_int) -> c_int {
    let c = closing(fd, fd);
    // SAFETY: the caller's own arguments.
    let r = unsafe { real::close(fd) };
    closed(c, !close_failed_with_nothing_closed(r));
    r
}

/// `close(fd)` with a cancellation acted on at the entry only.
#[inline(never)]
fn close_cancelling_at_entry(fd: c_int) -> c_int {
    cancel_at_entry(|| close_now(fd))
}

/// # Safety
/// As for C `close_range`.
#[inline(always)]
pub unsafe fn close_range(
    args::close_range { first, last, flags }: args::close_range,
) -> ret::close_range {
    let c = closing_range(first, last, flags);
    // SAFETY: the caller's own arguments.
    let r = unsafe { real::close_range(first, last, flags) };
    closed(c, r == 0);
    r
}

/// Before `close_range(first, last, flags)`: with `CLOSE_RANGE_UNSHARE`
/// the thread gets a table of its own first (the closes are made there).
fn closing_range(first: c_uint, last: c_uint, flags: c_int) -> Closing {
    if flags as c_uint & libc::CLOSE_RANGE_UNSHARE != 0 && valid_range(first, last, flags) {
        unsharing();
    }
    match closed_range(first, last, flags) {
        Some((lo, hi)) => closing(lo, hi),
        None => Closing::NONE,
    }
}

/// Whether the kernel accepts `close_range`'s arguments (`fs/file.c`:
/// no unknown flag, `first <= last`): one it refuses closes nothing.
fn valid_range(first: c_uint, last: c_uint, flags: c_int) -> bool {
    let known = libc::CLOSE_RANGE_CLOEXEC | libc::CLOSE_RANGE_UNSHARE;
    flags as c_uint & !known == 0 && first <= last
}

/// The descriptors `close_range(first, last, flags)` closes now: none with
/// `CLOSE_RANGE_CLOEXEC` (at exec the whole address space goes anyway),
/// nor with arguments the kernel refuses.
pub(super) fn closed_range(first: c_uint, last: c_uint, flags: c_int) -> Option<(c_int, c_int)> {
    (flags as c_uint & libc::CLOSE_RANGE_CLOEXEC == 0 && valid_range(first, last, flags)).then(
        || {
            (
                c_int::try_from(first).unwrap_or(c_int::MAX),
                c_int::try_from(last).unwrap_or(c_int::MAX),
            )
        },
    )
}

/// The calling thread is about to get a descriptor table of its own
/// (`table_owner.rs`); where no word is kept, nothing is marked.
fn unsharing() {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    table_owner::unsharing();
}

/// # Safety
/// As for C `unshare`.
#[inline(always)]
pub unsafe fn unshare(args::unshare { flags }: args::unshare) -> ret::unshare {
    if flags & libc::CLONE_FILES != 0 {
        unsharing();
    }
    // SAFETY: the caller's own arguments.
    unsafe { real::unshare(flags) }
}

/// # Safety
/// As for C `closefrom` (glibc's closes through the raw system call).
#[inline(always)]
pub unsafe fn closefrom(args::closefrom { lo }: args::closefrom) -> ret::closefrom {
    let c = closing(lo.max(0), c_int::MAX);
    // SAFETY: the caller's own arguments.
    unsafe { real::closefrom(lo) };
    closed(c, true);
}

/// The descriptors `syscall(nr, a1, a2, a3)` closes (or replaces), for
/// libc's `syscall` hook (`sandbox.rs`): a program may close through it.
pub(super) fn closed_by_syscall(
    nr: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
) -> Option<(c_int, c_int)> {
    // The kernel takes these descriptors as `unsigned int`: the upper
    // half of the word is dropped, not refused. A number past `c_int`'s
    // range is refused by the kernel (EBADF) and closes nothing.
    let fd = |a: c_long| Some(kernel_fd(a)).filter(|&f| f >= 0);
    match nr {
        libc::SYS_close => fd(a1).map(|f| (f, f)),
        libc::SYS_close_range => closed_range(a1 as c_uint, a2 as c_uint, a3 as c_int),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_dup2 if kernel_fd(a1) != kernel_fd(a2) => fd(a2).map(|f| (f, f)),
        libc::SYS_dup3 if kernel_fd(a1) != kernel_fd(a2) => fd(a2).map(|f| (f, f)),
        _ => None,
    }
}

/// A descriptor argument of a raw system call as the kernel reads it: its
/// low 32 bits (`unsigned int fd` in `fs/open.c`, `fs/file.c`,
/// `fs/fcntl.c`, `fs/locks.c`), seen as the `int` the hooks take.
pub(super) fn kernel_fd(a: c_long) -> c_int {
    a as u32 as c_int
}

/// `syscall(nr, a1, a2, a3, ...)` by way of `call`, with what the close
/// hooks do around it when it closes descriptors.
pub(super) fn around_syscall(
    nr: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    call: impl FnOnce() -> c_long,
) -> c_long {
    if nr == libc::SYS_unshare && a1 & libc::CLONE_FILES as c_long != 0 {
        unsharing();
    }
    if nr == libc::SYS_close_range {
        let c = closing_range(a1 as c_uint, a2 as c_uint, a3 as c_int);
        let r = call();
        closed(c, r == 0);
        return r;
    }
    let Some((lo, hi)) = closed_by_syscall(nr, a1, a2, a3) else {
        return call();
    };
    let c = closing(lo, hi);
    let r = call();
    if nr == libc::SYS_close {
        closed(c, !close_failed_with_nothing_closed(r as c_int));
    } else {
        closed(c, r >= 0);
    }
    r
}

/// # Safety
/// As for C `dup2`: `new` is closed first when it is open and not `old`.
#[inline(always)]
pub unsafe fn dup2(args::dup2 { old, new }: args::dup2) -> ret::dup2 {
    let c = if old != new {
        closing(new, new)
    } else {
        Closing::NONE
    };
    // SAFETY: the caller's own arguments.
    let r = unsafe { real::dup2(old, new) };
    closed(c, r >= 0);
    r
}

/// # Safety
/// As for C `dup3`.
#[inline(always)]
pub unsafe fn dup3(args::dup3 { old, new, flags }: args::dup3) -> ret::dup3 {
    let c = if old != new {
        closing(new, new)
    } else {
        Closing::NONE
    };
    // SAFETY: the caller's own arguments.
    let r = unsafe { real::dup3(old, new, flags) };
    closed(c, r >= 0);
    r
}

/// # Safety
/// As for C `fclose`: glibc's closes the stream's descriptor itself, not
/// through `close`.
#[inline(always)]
pub unsafe fn fclose(args::fclose { fp }: args::fclose) -> ret::fclose {
    let fd = if fp.is_null() {
        -1
    } else {
        // errno kept: glibc's `fileno` sets EBADF for a stream with no
        // descriptor, and the caller's errno must be what `fclose` leaves.
        // SAFETY: the caller's stream, about to be closed.
        before(|| unsafe { real::fileno(fp) })
    };
    // A stream with no descriptor (`fopencookie`, `fmemopen`) closes none,
    // and runs the program's own functions inside `fclose`, which may
    // leave it without returning (an exception, a switch of stacks): no
    // handler of ours may be registered across them.
    if fd >= 0 && cancellable(fd) {
        // SAFETY: the caller's own arguments.
        return unsafe { fclose_cancellable(fp, fd) };
    }
    let mut taken = Closing::NONE;
    // SAFETY: the caller's own arguments; `taken` outlives the call.
    unsafe { fclose_told(fp, fd, &mut taken) }
}

/// `fclose(fp)` of a stream on `fd` where the thread may be cancelled in
/// it. glibc's `fclose` is a cancellation point only where it flushes (its
/// `write`), before it closes the descriptor (`__close_nocancel`): so
/// nothing here acts on a request, and a handler registered around the
/// call ends the close's place among closes ([`fclose_left`]) when glibc
/// leaves the call by unwinding (a cancellation, `pthread_exit` from a
/// signal handler) or by `longjmp` out of a signal handler (glibc's
/// `longjmp` runs the handlers of the frames it leaves,
/// `__pthread_cleanup_upto`). Where glibc has no such handlers (before
/// 2.34, without libpthread: no thread to cancel either), plainly.
///
/// # Safety
/// As for C `fclose`.
#[inline(never)]
unsafe fn fclose_cancellable(fp: *mut FILE, fd: c_int) -> c_int {
    let mut taken = Closing::NONE;
    let taken_at: *mut Closing = &mut taken;
    let mut buf = real::CleanupBuffer::new();
    // SAFETY: `buf` and `taken` live in this frame, and the handler is
    // popped before it returns. Only glibc's code runs inside the call for
    // a stream with a descriptor (its flush writes through its own
    // `__write`), so the frame is left only by returning, or in ways that
    // run the handler.
    let pushed = unsafe { real::cleanup_push(&mut buf, fclose_left, taken_at.cast()) };
    // SAFETY: the caller's own arguments; `taken` outlives the call.
    let r = unsafe { fclose_told(fp, fd, taken_at) };
    if pushed {
        // SAFETY: the handler pushed above, the innermost one (glibc's
        // fclose pops what it pushes).
        unsafe { real::cleanup_pop(&mut buf) };
    }
    r
}

/// The cleanup handler of an [`fclose_cancellable`] left by unwinding or
/// a `longjmp`: the close's place ends, and the engine is told the
/// descriptor closed, whether glibc had closed it or not (a cancellation
/// in the flush leaves it open; a signal's handler may leave after the
/// close, and another thread may have opened the number again since).
/// Told so wrongly, the engine keeps what it took (a mapping made through
/// the descriptor before is unmapped at its munmap, not deferred); told
/// the opposite wrongly, it would give another open file's number this
/// one's records.
///
/// # Safety
/// `taken` points at that frame's `Closing`.
unsafe extern "C" fn fclose_left(taken: *mut libc::c_void) {
    // SAFETY: as the caller promises; written with a volatile store.
    let c = unsafe { taken.cast::<Closing>().read_volatile() };
    closed(c, true);
}

/// `fclose(fp)` of a stream on `fd` (or none, -1) with the engine told
/// before and after. What the engine took is in `*taken` while the real
/// call runs (and nothing otherwise), for [`fclose_left`].
///
/// # Safety
/// As for C `fclose`; `taken` is valid for writes.
unsafe fn fclose_told(fp: *mut FILE, fd: c_int, taken: *mut Closing) -> c_int {
    let c = before(|| ENGINE.closing(&RealOs, fd, fd));
    // SAFETY: as the caller promises. Volatile: a cleanup handler reads
    // it if the call below is left without returning.
    unsafe { taken.write_volatile(c) };
    // SAFETY: the caller's own arguments.
    let r = unsafe { real::fclose(fp) };
    // SAFETY: as above.
    unsafe { taken.write_volatile(Closing::NONE) };
    // glibc closes the descriptor whatever the flush answered.
    closed(c, true);
    r
}

/// Releases what munmapq holds of the file `path` names (relative to
/// `dir`, not following a last symlink), when anything is tracked.
fn losing_name(dir: c_int, path: *const c_char) {
    if path.is_null() || !ENGINE.tracks_any() {
        return;
    }
    before(|| {
        // SAFETY: plain data; the kernel writes it or fails.
        let mut sx: libc::statx = unsafe { core::mem::zeroed() };
        // SAFETY: the caller's NUL-terminated path and a valid out-pointer
        // (the raw call: glibc's wrapper may fall back to fstatat).
        let r = unsafe {
            super::sys::call_errno(
                libc::SYS_statx,
                &[
                    dir as libc::c_long,
                    path as libc::c_long,
                    libc::AT_SYMLINK_NOFOLLOW as libc::c_long,
                    libc::STATX_INO as libc::c_long,
                    &mut sx as *mut libc::statx as libc::c_long,
                ],
            )
        };
        if r == 0 {
            let dev = libc::makedev(sx.stx_dev_major, sx.stx_dev_minor);
            ENGINE.unlinking(&RealOs, dev, sx.stx_ino);
        }
    });
}

/// The result of an unlink, rename or unmount, after the engine applied
/// what the call recorded if it found the table busy (errno kept).
fn after_name_call(r: c_int) -> c_int {
    before(|| ENGINE.name_call_done(&RealOs));
    r
}

/// # Safety
/// As for C `unlink`.
#[inline(always)]
pub unsafe fn unlink(args::unlink { path }: args::unlink) -> ret::unlink {
    losing_name(libc::AT_FDCWD, path);
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::unlink(path) })
}

/// # Safety
/// As for C `unlinkat`.
#[inline(always)]
pub unsafe fn unlinkat(args::unlinkat { dir, path, flags }: args::unlinkat) -> ret::unlinkat {
    losing_name(dir, path);
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::unlinkat(dir, path, flags) })
}

/// # Safety
/// As for C `remove`.
#[inline(always)]
pub unsafe fn remove(args::remove { path }: args::remove) -> ret::remove {
    losing_name(libc::AT_FDCWD, path);
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::remove(path) })
}

/// # Safety
/// As for C `rename`: the file at `new`, if any, loses that name.
#[inline(always)]
pub unsafe fn rename(args::rename { old, new }: args::rename) -> ret::rename {
    losing_name(libc::AT_FDCWD, new);
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::rename(old, new) })
}

/// # Safety
/// As for C `renameat`.
#[inline(always)]
pub unsafe fn renameat(
    args::renameat {
        old_dir,
        old,
        new_dir,
        new,
    }: args::renameat,
) -> ret::renameat {
    losing_name(new_dir, new);
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::renameat(old_dir, old, new_dir, new) })
}

/// # Safety
/// As for C `renameat2` (with `RENAME_EXCHANGE` both files keep a name:
/// releasing the one at `new` only costs its reuse).
#[inline(always)]
pub unsafe fn renameat2(
    args::renameat2 {
        old_dir,
        old,
        new_dir,
        new,
        flags,
    }: args::renameat2,
) -> ret::renameat2 {
    losing_name(new_dir, new);
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::renameat2(old_dir, old, new_dir, new, flags) })
}

/// # Safety
/// As for C `umount`.
#[inline(always)]
pub unsafe fn umount(args::umount { target }: args::umount) -> ret::umount {
    before(|| ENGINE.unmounting(&RealOs));
    // SAFETY: the caller's own arguments.
    let r = unsafe { real::umount(target) };
    // A mount id may be given to a new mount (before unique ids): what
    // was mapped through the old one is never handed out for it.
    ENGINE.mounts_changed();
    after_name_call(r)
}

/// # Safety
/// As for C `umount2`.
#[inline(always)]
pub unsafe fn umount2(args::umount2 { target, flags }: args::umount2) -> ret::umount2 {
    before(|| ENGINE.unmounting(&RealOs));
    // SAFETY: the caller's own arguments.
    let r = unsafe { real::umount2(target, flags) };
    // A mount id may be given to a new mount (before unique ids): what
    // was mapped through the old one is never handed out for it.
    ENGINE.mounts_changed();
    after_name_call(r)
}

/// # Safety
/// As for C `shm_unlink`: glibc unlinks `/dev/shm/NAME` itself, past the
/// `unlink` hook, so the object's queued mappings are released here.
#[inline(always)]
pub unsafe fn shm_unlink(args::shm_unlink { name }: args::shm_unlink) -> ret::shm_unlink {
    if ENGINE.tracks_any() {
        let mut path: ShmPath = [0; core::mem::size_of::<ShmPath>()];
        if shm_path(name, &mut path) {
            losing_name(libc::AT_FDCWD, path.as_ptr().cast());
        }
    }
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::shm_unlink(name) })
}
