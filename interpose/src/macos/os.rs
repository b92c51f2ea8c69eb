//! macOS: the core's view of the real system (the contract:
//! `munmapq_core::os::Os`).

use munmapq_core::file::{trackable_open_flags, FileFacts, PATH_ONLY};
use munmapq_core::os::Usage;
use munmapq_core::os::{Os, PerThread};

pub struct RealOs;

impl Os for RealOs {
    crate::posix::same_os_methods!();

    /// XNU has no copy-up filesystem (`bsd/miscfs/union/` holds only a
    /// header), so what `fstat` says is what a mapping shows.
    fn readable_file(&self, fd: i32) -> Option<FileFacts> {
        let facts = crate::posix::regular_file_facts(fd)?;
        // SAFETY: F_GETFL takes no argument and only reads; a bad fd only
        // makes it fail.
        let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        trackable_open_flags(fl, PATH_ONLY).then_some(facts)
    }

    /// Mach `task_info(MACH_TASK_BASIC_INFO)` (xnu `osfmk/kern/task.c`
    /// fills `resident_size` and `virtual_size`).
    fn usage(&self) -> Option<Usage> {
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

    /// No map-count limit on macOS.
    fn map_count(&self) -> Option<usize> {
        None
    }

    /// macOS's MADV_DONTNEED only deactivates pages; the queue is bounded
    /// by unmapping instead.
    fn drop_pages(&self, _addr: usize, _len: usize) -> bool {
        false
    }

    /// No per-thread hook frames on macOS: a lock abandoned by a longjmp
    /// stays locked.
    fn thread_cells(&self) -> Option<&'static PerThread> {
        None
    }
}
