//! The process's memory as the sizing rule needs it (core/src/sizing.rs):
//! current RSS and address space, the number of mappings, `RLIMIT_AS`.
//!
//! Linux: `/proc/self/statm` through an fd opened at load time (and again in
//! a fork child: `/proc/self` names the process that opened it), read with
//! one `pread`; the fd's identity is checked with `fstat` first, since the
//! program may have closed it or put another file at its number. Measured
//! (BENCHMARKS.md, "Cost of the accounting"): about 1.5 us per read, against
//! about 20 us for `/proc/self/status` and 40+ us for `smaps_rollup`;
//! `getrusage` is cheaper but knows only the peak. `mincore` is no use: it
//! reports the page cache, not this process's pages. The map count has no
//! cheap source: `/proc/self/maps` is read and its lines counted (cost
//! grows with the number of mappings), rarely.
//!
//! macOS: Mach `task_info(MACH_TASK_BASIC_INFO)` (osfmk/kern/task.c in
//! apple-oss-distributions/xnu fills `resident_size` and `virtual_size`);
//! no map-count limit.

#[cfg(target_os = "linux")]
use core::sync::atomic::{AtomicI32, AtomicU64};
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use munmapq_core::sizing::Usage;

static PAGE: AtomicUsize = AtomicUsize::new(4096);
#[cfg(target_os = "linux")]
static STATM_FD: AtomicI32 = AtomicI32::new(-1);
#[cfg(target_os = "linux")]
static STATM_DEV: AtomicU64 = AtomicU64::new(0);
#[cfg(target_os = "linux")]
static STATM_INO: AtomicU64 = AtomicU64::new(0);

/// Where the kept fd goes: far above the numbers a program expects `open`
/// to hand out next (one started with fd 0 closed must not get ours as
/// its stdin).
#[cfg(target_os = "linux")]
const STATM_FD_MIN: libc::c_int = 1000;

/// Opens `/proc/self/statm` for later reads (at load time).
#[cfg(target_os = "linux")]
pub fn open_statm(page: usize) {
    PAGE.store(page, Relaxed);
    STATM_FD.store(-1, Relaxed);
    // SAFETY: a NUL-terminated path; open has no other preconditions.
    let low = unsafe {
        libc::open(
            c"/proc/self/statm".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if low < 0 {
        return;
    }
    // SAFETY: duplicating and closing our own fd.
    let fd = unsafe {
        match libc::fcntl(low, libc::F_DUPFD_CLOEXEC, STATM_FD_MIN) {
            // RLIMIT_NOFILE below the minimum: keep a number past stdio.
            high if high < 0 && low > 2 => low,
            high => {
                libc::close(low);
                high
            }
        }
    };
    if fd < 0 {
        return;
    }
    // SAFETY: plain out-parameter.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: a valid out-pointer and our own fd.
    if unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st as *mut libc::stat) } != 0 {
        // SAFETY: our own fd.
        unsafe { libc::close(fd) };
        return;
    }
    STATM_DEV.store(st.st_dev as u64, Relaxed);
    STATM_INO.store(st.st_ino as u64, Relaxed);
    STATM_FD.store(fd, Relaxed);
}

/// In a fork child: `/proc/self` named the parent when the fd was opened,
/// so the inherited fd (ours alone) is replaced.
#[cfg(target_os = "linux")]
pub fn reopen_statm_in_child() {
    let fd = STATM_FD.load(Relaxed);
    if fd >= 0 {
        // SAFETY: the fd is the library's own (checked by identity below
        // on every read; nothing in the child has run yet).
        unsafe { libc::close(fd) };
    }
    open_statm(PAGE.load(Relaxed));
}

#[cfg(not(target_os = "linux"))]
pub fn open_statm(page: usize) {
    PAGE.store(page, Relaxed);
}

#[cfg(not(target_os = "linux"))]
pub fn reopen_statm_in_child() {}

#[cfg(target_os = "linux")]
pub fn usage() -> Option<Usage> {
    let page = PAGE.load(Relaxed);
    let fd = match STATM_FD.load(Relaxed) {
        fd if fd >= 0 && still_statm(fd) => fd,
        _ => {
            // Closed by the program, or its number reused: never touch that
            // number again; open a new one.
            open_statm(page);
            STATM_FD.load(Relaxed)
        }
    };
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 128];
    // SAFETY: `buf` is valid for its length; pread does not move the offset.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
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

#[cfg(target_os = "linux")]
fn still_statm(fd: libc::c_int) -> bool {
    // SAFETY: plain out-parameter.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: a valid out-pointer; a closed fd only makes the call fail.
    let ok = unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st as *mut libc::stat) } == 0;
    ok && st.st_dev as u64 == STATM_DEV.load(Relaxed) && st.st_ino as u64 == STATM_INO.load(Relaxed)
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
