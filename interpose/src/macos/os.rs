//! macOS: the core's view of the real system (the contract:
//! `munmapq_core::os::Os`).

use munmapq_core::file::FileFacts;
use munmapq_core::os::Usage;
use munmapq_core::os::{Os, PerThread};

pub struct RealOs;

impl Os for RealOs {
    crate::posix::same_os_methods!();

    /// XNU has no copy-up filesystem (`bsd/miscfs/union/` holds only a
    /// header), so what `fstat` says is what a mapping shows.
    fn file_facts(&self, fd: i32) -> Option<FileFacts> {
        crate::posix::regular_file_facts(fd)
    }

    /// Asked only when a queued mapping would answer the mmap
    /// (`mapping_forgets_descriptor`): no hook sees closes on macOS
    /// (`tracks_closes` is false), so no answer can be kept.
    fn open_flags(&self, fd: i32) -> i32 {
        // `fcntl$NOCANCEL`: the plain `fcntl` is a cancellation point (xnu
        // `bsd/kern/kern_descrip.c` `sys_fcntl` calls
        // `__pthread_testcancel(1)`), and this runs inside the program's mmap.
        // SAFETY: F_GETFL only reads (the 0 is the unused argument fcntl-base.c's
        // `va_arg` reads); a bad fd only makes it fail.
        unsafe { super::real::libsystem::fcntl_nocancel(fd, libc::F_GETFL, 0) }
    }

    /// One Mach `task_info(MACH_TASK_BASIC_INFO)` (xnu `osfmk/kern/task.c`
    /// `task_info` fills `virtual_size`, `resident_size` from the task's
    /// `phys_mem` ledger balance and `resident_size_max` from its lifetime
    /// maximum, `ledger_get_lifetime_max`): the peak comes with it, so
    /// `peak_resident` is never asked.
    fn usage(&self) -> Option<Usage> {
        task_basic_info().map(|info| Usage {
            size: info.virtual_size as usize,
            resident: info.resident_size as usize,
            peak: Some(info.resident_size_max as usize),
        })
    }

    /// xnu `bsd/kern/kern_mman.c` `mmap`: a file mapping takes its own
    /// reference on the vnode (`ubc_map`, a use count) and drops the file's
    /// before it returns (`vnode_put`, `fp_drop`); for `MAP_PRIVATE` its
    /// maximum protection does not depend on the descriptor's `FWRITE`
    /// ("maxprot |= VM_PROT_WRITE"), and without `FREAD` a `PROT_READ`
    /// mapping fails with EACCES.
    fn mapping_forgets_descriptor(&self) -> bool {
        true
    }

    /// See `munmapq_core::sizing`: a queued mapping's pages are clean file
    /// pages, outside `phys_footprint`; a drop lowers only `resident_size`.
    fn drops_free_memory(&self) -> bool {
        false
    }

    /// No map-count limit on macOS.
    fn map_count(&self) -> Option<usize> {
        None
    }

    /// Never asked: with `drops_free_memory` false no resident budget is
    /// kept (`munmapq_core::sizing`, `over_budget`), so the queue drops no
    /// pages on macOS. Were it asked, false makes it unmap instead.
    fn drop_pages(&self, _addr: usize, _len: usize) -> bool {
        false
    }

    /// No per-thread hook frames on macOS: a lock abandoned by a longjmp
    /// stays locked.
    fn thread_cells(&self) -> Option<&'static PerThread> {
        None
    }

    /// `sched_yield`: the holder may be a preempted thread on this very
    /// CPU, and a spin of one instruction would spend the bounded wait
    /// before a fork in microseconds. libpthread's `sched_yield`
    /// (libpthread `src/pthread.c`) is `swtch_pri(0)` (or `thread_switch`),
    /// Mach traps that never test for a pending cancel: not a cancellation
    /// point.
    fn pause(&self) {
        // SAFETY: no arguments, no preconditions.
        unsafe { libc::sched_yield() };
    }
}

/// The real system as the raw stubs' callers see it (the `__mmap` and
/// `__munmap` hooks, `hooks.rs`): mmap and munmap through libSystem's raw
/// `__mmap` and `__munmap`, everything else as `RealOs`.
pub struct RawOs;

impl Os for RawOs {
    fn mmap(&self, m: munmapq_core::os::Mmap) -> Result<usize, munmapq_core::os::Errno> {
        // SAFETY: arguments the program passed to its own `__mmap` call.
        let p =
            unsafe { super::real::__mmap(m.addr as *mut _, m.len, m.prot, m.flags, m.fd, m.off) };
        crate::errno::addr_result(p)
    }

    fn munmap(&self, addr: usize, len: usize) -> Result<(), munmapq_core::os::Errno> {
        // SAFETY: either the program's own `__munmap` arguments, or a range
        // munmapq mapped for the program and now owns alone.
        crate::errno::int_result(unsafe { super::real::__munmap(addr as *mut _, len) }).map(drop)
    }

    fn file_facts(&self, fd: i32) -> Option<FileFacts> {
        RealOs.file_facts(fd)
    }

    fn open_flags(&self, fd: i32) -> i32 {
        RealOs.open_flags(fd)
    }

    fn usage(&self) -> Option<Usage> {
        RealOs.usage()
    }

    fn mapping_forgets_descriptor(&self) -> bool {
        RealOs.mapping_forgets_descriptor()
    }

    fn drops_free_memory(&self) -> bool {
        RealOs.drops_free_memory()
    }

    fn map_count(&self) -> Option<usize> {
        RealOs.map_count()
    }

    fn address_space_limit(&self) -> Option<usize> {
        RealOs.address_space_limit()
    }

    fn drop_pages(&self, addr: usize, len: usize) -> bool {
        RealOs.drop_pages(addr, len)
    }

    fn thread_cells(&self) -> Option<&'static PerThread> {
        RealOs.thread_cells()
    }

    fn pause(&self) {
        RealOs.pause()
    }

    fn this_thread(&self) -> usize {
        RealOs.this_thread()
    }

    fn signal_stack(&self) -> munmapq_core::os::SignalStack {
        RealOs.signal_stack()
    }
}

/// `task_info(MACH_TASK_BASIC_INFO)` of this task (xnu `osfmk/kern/task.c`
/// fills `virtual_size`, `resident_size` and `resident_size_max`).
fn task_basic_info() -> Option<libc::mach_task_basic_info> {
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
    (kr == libc::KERN_SUCCESS).then_some(info)
}
