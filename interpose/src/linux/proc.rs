//! Linux: the process's memory as the sizing rule needs it
//! (`munmapq_core::sizing`), read from `/proc`: current RSS and address
//! space, the number of mappings, `vm.max_map_count`.
//!
//! Each read opens the file, reads it and closes it: no descriptor is kept
//! between reads (a program would see it in `/proc/self/fd`, could close it
//! or reuse its number, and a fork child would inherit the parent's
//! `/proc/self`), but for the trace's (`KEPT_STATM`, below). That costs more than a read through a kept descriptor,
//! and reads are rare (a `statm` about once per 16 deferrals while the
//! queue is longer than its budget, the map count every few thousand
//! deferrals, `max_map_count` once).
//!
//! `statm` is the cheapest source of RSS and address space (`status` and
//! `smaps_rollup` format far more); `getrusage` knows only the peak (read
//! with it: the budget follows the peak), and `mincore` reports the page
//! cache, not this process's pages. The mappings themselves are read
//! from `/proc/self/maps` (`maps.rs`).

use core::ffi::CStr;
use core::sync::atomic::{AtomicI32, Ordering::Relaxed};
use munmapq_core::config::parse_uint;
use munmapq_core::os::Usage;

/// `/proc`'s file system type (`statfs`'s `f_type`).
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// Opens `path`, hands what each read returns (into `buf`) to `take` until
/// the file ends or `take` answers false, and closes it. None if it cannot
/// be opened or a read fails. Every asynchronous signal is blocked from
/// before the open to after the close: a handler that `siglongjmp`s out of
/// the hook that called this would otherwise leave the descriptor open.
/// Raw system calls: the library's own `close` must not be a hooked one.
///
/// The number is the lowest free one, and while it is held another thread
/// of the program may point it at a file of its own (`dup2` onto a number
/// it takes for free). So in a process with other threads the file the
/// number names is looked at right after the open (`fstat`: its device and
/// inode; `fstatfs`: a file of `/proc`, else it is left alone, unread) and
/// again before the close, which is made only if it is still that file;
/// and it is read at an offset (`pread`), which moves no offset of a file
/// the number may have become in between, nor takes a pipe's bytes
/// (`ESPIPE`).
pub(super) fn read(path: &CStr, buf: &mut [u8], mut take: impl FnMut(&[u8]) -> bool) -> Option<()> {
    use super::sys::call;
    use libc::c_long;
    let _blocked = super::sys::SignalsBlocked::new();
    let flags = (libc::O_RDONLY | libc::O_CLOEXEC) as c_long;
    // SAFETY: a NUL-terminated path; openat has no other preconditions.
    let fd = unsafe {
        call(
            libc::SYS_openat,
            &[libc::AT_FDCWD as c_long, path.as_ptr() as c_long, flags],
        )
    };
    if fd < 0 {
        return None;
    }
    let shared = !super::real::single_threaded();
    let opened = shared.then(|| file_identity(fd)).flatten();
    let on_proc =
        || super::sys::file_system(fd as i32).is_some_and(|(magic, _)| magic == PROC_SUPER_MAGIC);
    if shared && (opened.is_none() || !on_proc()) {
        return None;
    }
    let ours = || !shared || file_identity(fd) == opened;
    let mut at: c_long = 0;
    let ok = loop {
        // SAFETY: `buf` is valid for its length; a read of whatever file
        // the number names now, at an offset, changes nothing of it.
        let n = unsafe {
            call(
                libc::SYS_pread64,
                &[fd, buf.as_mut_ptr() as c_long, buf.len() as c_long, at],
            )
        };
        if n == -(libc::EINTR as c_long) {
            continue;
        }
        if n < 0 {
            break false;
        }
        at += n;
        if n == 0 || !take(&buf[..n as usize]) {
            break true;
        }
    };
    if ours() {
        // SAFETY: our own fd, closed once.
        unsafe { call(libc::SYS_close, &[fd]) };
    }
    ok.then_some(())
}

/// The device and inode of the file `fd` names (a raw `fstat`).
fn file_identity(fd: libc::c_long) -> Option<(u64, u64)> {
    // SAFETY: `stat` is plain data; fstat writes it or fails.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: a valid out-pointer; a bad fd only makes the call fail.
    let r = unsafe {
        super::sys::call(
            libc::SYS_fstat,
            &[fd, &mut st as *mut libc::stat as libc::c_long],
        )
    };
    (r == 0).then_some((st.st_dev, st.st_ino))
}

/// Current address space and RSS from `/proc/self/statm` (its first
/// read: the first two fields, in pages).
pub fn usage() -> Option<Usage> {
    let page = super::real::page_size();
    let mut usage = None;
    read(c"/proc/self/statm", &mut [0u8; 128], |text| {
        let mut fields = text.split(|&c| c == b' ').map(parse_uint);
        usage = fields.next().flatten().zip(fields.next().flatten());
        false
    })?;
    let (size, resident) = usage?;
    Some(Usage {
        size: (size as usize).saturating_mul(page),
        resident: (resident as usize).saturating_mul(page),
        // From getrusage, another call (`peak_resident`).
        peak: None,
    })
}

/// The process's peak RSS (`getrusage`'s `ru_maxrss`, KiB; a raw call, one
/// system call).
pub fn peak_resident() -> Option<usize> {
    // SAFETY: plain out-parameter.
    let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: RUSAGE_SELF and a valid out-pointer.
    let r = unsafe {
        super::sys::call(
            libc::SYS_getrusage,
            &[
                libc::RUSAGE_SELF as libc::c_long,
                &mut ru as *mut libc::rusage as libc::c_long,
            ],
        )
    };
    (r == 0).then(|| (ru.ru_maxrss.max(0) as usize).saturating_mul(1024))
}

/// `vm.max_map_count` (its first read: the leading digits).
pub fn max_map_count() -> Option<usize> {
    let mut count = None;
    read(c"/proc/sys/vm/max_map_count", &mut [0u8; 32], |text| {
        let digits = text.split(|c| !c.is_ascii_digit()).next();
        count = digits.and_then(parse_uint).map(|v| v as usize);
        false
    })?;
    count
}

/// Writes `v` in decimal at the start of `out` (10 bytes hold any u32);
/// answers how many bytes.
pub(super) fn write_decimal(mut v: u32, out: &mut [u8]) -> usize {
    let mut digits = [0u8; 10];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        out[i] = digits[n - 1 - i];
    }
    n
}

/// `/proc/self/statm`, kept open for the trace's munmap records, or -1.
/// The trace alone keeps it (as it keeps its own file): a traced program's
/// threads would otherwise open and close it at every munmap, and under
/// qemu-user 7.2 (which runs the arm64 tests) a fork child then now and
/// then blocked for good in its own first open or close, on a lock of
/// qemu's another thread held at the fork.
static KEPT_STATM: AtomicI32 = AtomicI32::new(-1);

/// Opens `/proc/self/statm` for [`kept_resident`] (the trace's, from the
/// constructor: one thread).
pub fn keep_statm() {
    let flags = (libc::O_RDONLY | libc::O_CLOEXEC) as libc::c_long;
    let path = c"/proc/self/statm";
    // SAFETY: a NUL-terminated path; openat has no other preconditions.
    let fd = unsafe {
        super::sys::call(
            libc::SYS_openat,
            &[
                libc::AT_FDCWD as libc::c_long,
                path.as_ptr() as libc::c_long,
                flags,
            ],
        )
    };
    if fd >= 0 {
        KEPT_STATM.store(fd as i32, Relaxed);
    }
}

/// In a fork child: the kept file is the parent's (`/proc/self` was read
/// at the open). It is left open: a close here is what keeping it avoids.
pub fn forget_kept_statm() {
    KEPT_STATM.store(-1, Relaxed);
}

/// The resident set in bytes, read through the kept file: None without
/// one, or where the number no longer names a file of `/proc` (the program
/// closed it, or put a file of its own there). Read at an offset, which
/// moves no offset of whatever the number names.
pub fn kept_resident() -> Option<usize> {
    let fd = KEPT_STATM.load(Relaxed);
    if fd < 0 || super::sys::file_system(fd).is_none_or(|(m, _)| m != PROC_SUPER_MAGIC) {
        return None;
    }
    let mut buf = [0u8; 128];
    // SAFETY: `buf` is valid for its length.
    let n = unsafe {
        super::sys::call(
            libc::SYS_pread64,
            &[
                fd as libc::c_long,
                buf.as_mut_ptr() as libc::c_long,
                buf.len() as libc::c_long,
                0,
            ],
        )
    };
    let text = buf.get(..usize::try_from(n).ok()?)?;
    let pages = text.split(|&c| c == b' ').nth(1).and_then(parse_uint)?;
    Some((pages as usize).saturating_mul(super::real::page_size()))
}
