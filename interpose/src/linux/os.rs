//! Linux: the core's view of the real system (the contract:
//! `munmapq_core::os::Os`).

use super::{file, maps, proc};
use munmapq_core::file::FileFacts;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
use munmapq_core::os::FdTable;
use munmapq_core::os::{Os, PerThread};
use munmapq_core::os::{Region, Usage};

pub struct RealOs;

impl Os for RealOs {
    crate::posix::same_os_methods!();

    /// The raw `statx` (`file.rs`): glibc's fstat is fstatat(fd, "",
    /// AT_EMPTY_PATH), which costs a path walk.
    fn file_facts(&self, fd: i32) -> Option<FileFacts> {
        file::regular_file_facts(fd)
    }

    /// `fstatfs`: hugetlbfs's block size is its page size (`file.rs`).
    fn huge_page_size(&self, fd: i32) -> Option<usize> {
        file::huge_page_size(fd)
    }

    /// `readlink` of `/proc/self/fd/N`, hashed (`file.rs`).
    fn link_name(&self, fd: i32) -> Option<u64> {
        file::link_name(fd)
    }

    /// `personality(0xffffffff)`, which only asks (`context.rs`).
    fn read_implies_exec(&self) -> Option<bool> {
        super::context::read_implies_exec()
    }

    /// The raw system call: glibc's fcntl decodes varargs, and is hooked.
    fn open_flags(&self, fd: i32) -> i32 {
        // SAFETY: F_GETFL takes no argument and only reads; a bad fd only
        // makes it fail.
        unsafe {
            super::sys::call_errno(
                libc::SYS_fcntl,
                &[fd as libc::c_long, libc::F_GETFL as libc::c_long],
            ) as i32
        }
    }

    /// Every call that ends a description reaches the engine: the close
    /// hooks of `lastclose.rs` and `syscall`'s (`sandbox.rs`).
    fn tracks_closes(&self) -> bool {
        true
    }

    /// A thread-local word (`table_owner.rs`): one load, and a `getpid`
    /// only between a `vfork` and the parent's next hook.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[inline]
    fn fd_table(&self) -> FdTable {
        super::table_owner::fd_table()
    }

    /// Asked of the kernel (`prctl(PR_GET_SECCOMP)`, `sys.rs`).
    fn inherited_filter(&self) -> bool {
        let filtered = super::sys::seccomp_mode() != 0;
        if filtered {
            crate::init::sandboxed();
        }
        filtered
    }

    fn max_map_count(&self) -> Option<usize> {
        proc::max_map_count()
    }

    fn usage(&self) -> Option<Usage> {
        proc::usage()
    }

    fn peak_resident(&self) -> Option<usize> {
        proc::peak_resident()
    }

    fn map_count(&self) -> Option<usize> {
        maps::map_count()
    }

    fn each_region(&self, f: impl FnMut(Region)) -> Option<()> {
        maps::each_region(f)
    }

    fn drop_pages(&self, addr: usize, len: usize) -> bool {
        // The raw system call: madvise is hooked. On a read-only private
        // file mapping never written (tracked entries are), MADV_DONTNEED
        // only removes the page-table entries; the next access faults the
        // file's pages in again (mm/madvise.c, madvise_dontneed_single_vma).
        // SAFETY: a queued range munmapq alone owns.
        unsafe {
            super::sys::call(
                libc::SYS_madvise,
                &[
                    addr as libc::c_long,
                    len as libc::c_long,
                    libc::MADV_DONTNEED as libc::c_long,
                ],
            ) == 0
        }
    }

    /// From the program break (raw `brk(0)`: the kernel's, never glibc's
    /// cached one) to halfway to the C library's code: the kernel places
    /// mappings top-down from below the stack, so a window lies in the
    /// lower half only where the space above was taken, and there it may
    /// be right above the heap; below the break it is out of the heap's
    /// way. Empty where the libraries lie below the heap (the legacy
    /// bottom-up layout, an unlimited stack): mappings grow up from there
    /// towards it, tens of TiB away.
    fn heap_way(&self) -> (usize, usize) {
        // SAFETY: brk(0) changes nothing and answers the break.
        let brk = unsafe { super::sys::call(libc::SYS_brk, &[0]) } as usize;
        let libc = super::real::libc_address();
        if libc > brk {
            (brk, brk + (libc - brk) / 2)
        } else {
            (0, 0)
        }
    }

    /// `sched_yield` (raw: no hook, no libc state): the holder may be a
    /// preempted thread on this very CPU.
    fn pause(&self) {
        // SAFETY: no arguments.
        unsafe { super::sys::call(libc::SYS_sched_yield, &[]) };
    }

    /// `CLOCK_MONOTONIC` (raw: no libc state; 0 if refused).
    fn monotonic_us(&self) -> u64 {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a timespec on this stack, written by the kernel.
        let r = unsafe {
            super::sys::call(
                libc::SYS_clock_gettime,
                &[
                    libc::CLOCK_MONOTONIC as libc::c_long,
                    &mut t as *mut _ as libc::c_long,
                ],
            )
        };
        if r != 0 {
            return 0;
        }
        t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1_000
    }

    /// 100 µs of `nanosleep` (raw: no cancellation point, no libc state;
    /// a signal only ends it early).
    fn nap(&self) {
        let t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 100_000,
        };
        // SAFETY: a timespec on this stack, read by the kernel; no
        // remainder asked.
        unsafe { super::sys::call(libc::SYS_nanosleep, &[&t as *const _ as libc::c_long, 0]) };
    }

    /// The cells of `frames.rs` (one TLS access, no call).
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[inline]
    fn thread_cells(&self) -> Option<&'static PerThread> {
        Some(super::frames::cells())
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[inline(always)]
    fn framed<R>(&self, f: impl FnOnce() -> R) -> R {
        super::frames::framed(f)
    }

    #[inline(always)]
    fn keeping_errno<R>(&self, f: impl FnOnce() -> R) -> R {
        let saved = crate::errno::Saved::now();
        let r = f();
        saved.restore();
        r
    }

    /// No frames are kept on other architectures: no recovery there.
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fn thread_cells(&self) -> Option<&'static PerThread> {
        None
    }
}
