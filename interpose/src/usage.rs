//! The process's memory as the sizing rule needs it (core/src/sizing.rs):
//! current RSS and address space, the number of mappings, `RLIMIT_AS`.
//!
//! Linux: `/proc/self/statm`, opened, read once and closed at each read
//! (no descriptor is kept: see [`usage`]). Measured (BENCHMARKS.md, "Cost
//! of the accounting"): about 15 us per open+read+close (1.5-4 us through a
//! kept fd), against
//! about 20 us for `/proc/self/status` and 40+ us for `smaps_rollup`;
//! `getrusage` is cheaper but knows only the peak. `mincore` is no use: it
//! reports the page cache, not this process's pages. The map count has no
//! cheap source: `/proc/self/maps` is read and its lines counted (cost
//! grows with the number of mappings), rarely.
//!
//! macOS: Mach `task_info(MACH_TASK_BASIC_INFO)` (osfmk/kern/task.c in
//! apple-oss-distributions/xnu fills `resident_size` and `virtual_size`);
//! no map-count limit.

use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use munmapq_core::os::Usage;

static PAGE: AtomicUsize = AtomicUsize::new(4096);

/// The page size `statm` counts in (at load time).
pub fn set_page(page: usize) {
    PAGE.store(page, Relaxed);
}

/// Current address space and RSS from `/proc/self/statm`: open, one read,
/// close. No descriptor is kept between reads (a program would see it in
/// `/proc/self/fd`, could close it or reuse its number, and a fork child
/// would inherit the parent's `/proc/self`); the open and close cost about
/// 12 us more than a read through a kept fd, and reads are rare (see
/// `munmapq_core::sizing`: at most one per half budget queued).
#[cfg(target_os = "linux")]
pub fn usage() -> Option<Usage> {
    let page = PAGE.load(Relaxed);
    // SAFETY: a NUL-terminated path; open has no other preconditions.
    let fd = unsafe {
        libc::open(
            c"/proc/self/statm".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 128];
    // SAFETY: `buf` is valid for its length; `fd` is ours, closed right after.
    let n = unsafe {
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        n
    };
    if n <= 0 {
        return None;
    }
    let mut fields = buf[..n as usize]
        .split(|&c| c == b' ')
        .map(munmapq_core::config::parse_uint);
    let size = fields.next()?? as usize;
    let resident = fields.next()?? as usize;
    Some(Usage {
        size: size.saturating_mul(page),
        resident: resident.saturating_mul(page),
    })
}

#[cfg(target_os = "macos")]
pub fn usage() -> Option<Usage> {
    // SAFETY: plain out-parameter.
    let mut info: libc::mach_task_basic_info = unsafe { core::mem::zeroed() };
    let mut count = libc::MACH_TASK_BASIC_INFO_COUNT;
    // SAFETY: `info` is as large as MACH_TASK_BASIC_INFO_COUNT says;
    // mach_task_self names this task.
    #[allow(deprecated)]
    let kr = unsafe {
        libc::task_info(
            libc::mach_task_self(),
            libc::MACH_TASK_BASIC_INFO,
            (&mut info as *mut libc::mach_task_basic_info).cast(),
            &mut count,
        )
    };
    (kr == libc::KERN_SUCCESS).then_some(Usage {
        size: info.virtual_size as usize,
        resident: info.resident_size as usize,
    })
}

/// Lines of `/proc/self/maps`: one per mapping.
#[cfg(target_os = "linux")]
pub fn map_count() -> Option<usize> {
    // SAFETY: a NUL-terminated path.
    let fd = unsafe {
        libc::open(
            c"/proc/self/maps".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 4096];
    let mut lines = 0;
    let ok = loop {
        // SAFETY: `buf` is valid for its length; our own fd.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            break false;
        }
        if n == 0 {
            break true;
        }
        lines += buf[..n as usize].iter().filter(|&&c| c == b'\n').count();
    };
    // SAFETY: our own fd.
    unsafe { libc::close(fd) };
    ok.then_some(lines)
}

#[cfg(not(target_os = "linux"))]
pub fn map_count() -> Option<usize> {
    None
}

pub fn address_space_limit() -> Option<usize> {
    // SAFETY: plain out-parameter.
    let mut rl: libc::rlimit = unsafe { core::mem::zeroed() };
    // SAFETY: valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut rl) } != 0
        || rl.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    Some(rl.rlim_cur as usize)
}
