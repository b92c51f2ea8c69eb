//! Counters that outlive the process, under `munmapq --stats`
//! (`MUNMAPQ_STATS_DIR`, set by the launcher only).
//!
//! A process that dies of a signal (a pager quit early, `| head`), calls
//! `_exit` or execs never runs its exit handler, so an exit line alone
//! loses its counters. Here the engine's counters themselves
//! (`munmapq_core::stats::Stats`, page-aligned and one image long) are
//! replaced, where they lie, by a shared mapping of a file of their own,
//! `DIR/live-PID-N`: every update still is the one add to the same
//! address, and the kernel keeps the file's pages however the process
//! ends. The launcher reads the files after the command has ended.
//!
//! Costs, only under `--stats`, at load and in a fork child (which must
//! not add to its parent's file): `openat`, `getrlimit`, `write`, `mmap`
//! and `close` (and `fstat` under a file size limit). The file is written
//! whole before it is mapped, never extended by `ftruncate`: a page of a
//! sparse file would be allocated at the first add, and on a full file
//! system that fault is a SIGBUS. No file is written past `RLIMIT_FSIZE`
//! (the write would raise SIGXFSZ). Where a step fails, the process keeps
//! its private counters and reports them at exit as without this. When
//! the program installs a seccomp filter the mapping is given up first
//! (one anonymous `mmap` over it): the file keeps the counters so far, and
//! no later call of ours meets the filter.

use crate::ENGINE;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use libc::c_int;
use munmapq_core::stats::IMAGE_BYTES;

/// The directory, copied at start-up, then `/live-PID-N` and a NUL after
/// it: written by `attach` in place, which only runs where the process has
/// one thread (the constructor, a fork child), so that no hook's or
/// signal handler's stack holds a path.
static mut DIR: [u8; 4096] = [0; 4096];
/// What a fork child's file starts with (`.bss`: no page of the library's
/// file, none resident).
static mut ZEROES: [u8; IMAGE_BYTES] = [0; IMAGE_BYTES];
static DIR_LEN: AtomicUsize = AtomicUsize::new(0);
/// The counters are a shared mapping of this process's own file.
static ATTACHED: AtomicBool = AtomicBool::new(false);
static PAGE: AtomicUsize = AtomicUsize::new(0);

/// Whether the counters live in a file.
pub fn attached() -> bool {
    ATTACHED.load(Relaxed)
}

/// From the constructor: keeps the counters in `dir` if it is an absolute
/// path, with what they counted so far.
pub fn start(dir: &[u8], page: usize) {
    PAGE.store(page, Relaxed);
    // Room for "/live-PID-N" and the NUL after it.
    if !dir.starts_with(b"/") || dir.len() + 48 > 4096 {
        return;
    }
    // SAFETY: written once, in the constructor, before any reader.
    unsafe {
        let d = &mut *core::ptr::addr_of_mut!(DIR);
        d[..dir.len()].copy_from_slice(dir);
        d[dir.len()] = 0;
    }
    DIR_LEN.store(dir.len(), Relaxed);
    attach(Start::Keep);
}

/// In a fork child (its only thread): counters of its own, in a file of
/// its own, before anything adds to them (the engine zeroes them next).
/// Fails to zeroed private ones.
pub fn after_fork_in_child() {
    if attached() && !attach(Start::Zero) {
        detach();
    }
}

/// At exit: whether the counters are to be reported in a line, as without
/// a file: their file is removed first (each file is a page of `$TMPDIR`
/// for the whole run, and a build's short processes add up), so they are
/// never counted twice. If it cannot be removed they stay there, marked
/// ended, and no line is written.
pub fn at_exit() -> bool {
    if !attached() {
        return true;
    }
    // SAFETY: DIR holds this image's own file's path (NUL-terminated),
    // written by its last `attach`.
    if unsafe { unlink(core::ptr::addr_of!(DIR).cast()) } {
        return true;
    }
    ENGINE.stats.set_ended();
    false
}

/// `unlink`, errno untouched.
///
/// # Safety
/// `path` is NUL-terminated.
#[cfg(target_os = "linux")]
unsafe fn unlink(path: *const libc::c_char) -> bool {
    let args = [libc::AT_FDCWD as libc::c_long, path as libc::c_long, 0];
    // SAFETY: forwarded from our caller's contract.
    unsafe { crate::platform::sys::call(libc::SYS_unlinkat, &args) == 0 }
}

#[cfg(target_os = "macos")]
unsafe fn unlink(path: *const libc::c_char) -> bool {
    let saved = crate::errno::get();
    // SAFETY: forwarded from our caller's contract; the real unlink, not
    // the hook.
    let r = unsafe { crate::platform::real::unlink(path) } == 0;
    crate::errno::set(saved);
    r
}

/// Before a seccomp filter goes in: the counters leave the file (which
/// keeps what they were) for private memory, so that no later call of
/// ours (a fork child's `openat`) has to pass the filter.
pub fn detach() {
    if ATTACHED.swap(false, Relaxed) {
        let base = image_addr();
        // SAFETY: replaces the pages of our own counters, nothing else's,
        // by zeroed private ones.
        unsafe {
            map_fixed(
                base,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
            )
        };
    }
}

#[derive(PartialEq)]
enum Start {
    /// With the counters so far.
    Keep,
    /// With zeroes (a fork child: what is there is its parent's).
    Zero,
}

fn image_addr() -> usize {
    &ENGINE.stats as *const munmapq_core::stats::Stats as usize
}

/// Creates `DIR/live-PID-N` and maps it over the counters, errno
/// untouched.
fn attach(start: Start) -> bool {
    let saved = crate::errno::get();
    let done = try_attach(start);
    crate::errno::set(saved);
    done
}

fn try_attach(start: Start) -> bool {
    let page = PAGE.load(Relaxed);
    let base = image_addr();
    if page == 0 || !base.is_multiple_of(page) || !IMAGE_BYTES.is_multiple_of(page) {
        return false; // pages larger than the image (Linux 64 KiB)
    }
    let len = DIR_LEN.load(Relaxed);
    if len == 0 {
        return false;
    }
    let pid = crate::selfio::getpid() as u64;
    // SAFETY: this process has one thread here (see DIR); `start` wrote
    // the directory before.
    let path = unsafe { &mut *core::ptr::addr_of_mut!(DIR) };
    let fd = (0..64u64).find_map(|n| {
        let mut w = munmapq_core::stats::LineWriter {
            buf: &mut path[len..4095],
            len: 0,
        };
        w.put(b"/live-");
        w.num(pid);
        w.put(b"-");
        w.num(n);
        let end = len + w.len;
        path[end] = 0;
        // SAFETY: `path` is NUL-terminated.
        let fd = unsafe {
            crate::selfio::open(
                path.as_ptr().cast(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o600,
            )
        };
        match fd {
            fd if fd >= 0 => Some(Some(fd)),
            e if e == -libc::EEXIST || (e == -1 && crate::errno::get() == libc::EEXIST) => None,
            _ => Some(None),
        }
    });
    let Some(Some(fd)) = fd else {
        return false;
    };
    // Written whole (its blocks allocated) before it is mapped: a mapping
    // past the file's end, or over a hole the file system cannot fill,
    // faults on the first add.
    let from = match start {
        Start::Keep => base as *const u8,
        Start::Zero => core::ptr::addr_of!(ZEROES).cast::<u8>(),
    };
    // SAFETY: IMAGE_BYTES of the counters, or of zeroes, read as the
    // kernel copies them.
    let written = crate::posix::fits_file_size_limit(fd, IMAGE_BYTES)
        && unsafe { write_all(fd, from, IMAGE_BYTES) };
    // SAFETY: maps our own file over our own counters' pages.
    let mapped = written && unsafe { map_fixed(base, libc::MAP_SHARED | libc::MAP_FIXED, fd) };
    // SAFETY: our own descriptor; the mapping keeps the file.
    unsafe { crate::selfio::close(fd) };
    if mapped {
        // An image without its owner is not read (a file whose write or
        // mapping failed stays ownerless): set once it is in place.
        ENGINE.stats.set_owner(pid);
        ATTACHED.store(true, Relaxed);
    }
    mapped
}

/// # Safety
/// `buf` is valid for `len` bytes.
unsafe fn write_all(fd: c_int, buf: *const u8, len: usize) -> bool {
    let mut done = 0;
    while done < len {
        // SAFETY: within our caller's buffer.
        let n = unsafe { crate::selfio::write(fd, buf.add(done).cast(), len - done) };
        if n <= 0 {
            return false;
        }
        done += n as usize;
    }
    true
}

/// Maps `IMAGE_BYTES` at `base`, read-write, errno untouched; whether the
/// mapping is there.
///
/// # Safety
/// `base` is the counters' own pages.
#[cfg(target_os = "linux")]
unsafe fn map_fixed(base: usize, flags: c_int, fd: c_int) -> bool {
    let args = [
        base as libc::c_long,
        IMAGE_BYTES as libc::c_long,
        (libc::PROT_READ | libc::PROT_WRITE) as libc::c_long,
        flags as libc::c_long,
        fd as libc::c_long,
        0,
    ];
    // SAFETY: our caller's contract: nothing else lives in these pages.
    unsafe { crate::platform::sys::call(libc::SYS_mmap, &args) as usize == base }
}

#[cfg(target_os = "macos")]
unsafe fn map_fixed(base: usize, flags: c_int, fd: c_int) -> bool {
    let saved = crate::errno::get();
    // SAFETY: our caller's contract: nothing else lives in these pages; the
    // real mmap, not the hook.
    let p = unsafe {
        crate::platform::real::mmap(
            base as *mut libc::c_void,
            IMAGE_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            0,
        )
    };
    crate::errno::set(saved);
    p as usize == base
}
