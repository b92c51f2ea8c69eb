//! The engine's view of the real system.

use crate::{errno, real};
use munmapq_core::file::{readable_open_flags, FileFacts, PATH_ONLY};
use munmapq_core::os::{Errno, Os, PerThread, SignalStack};
use munmapq_core::sizing::Usage;

pub struct RealOs;

impl Os for RealOs {
    fn mmap(
        &self,
        addr: usize,
        len: usize,
        prot: i32,
        flags: i32,
        fd: i32,
        off: i64,
    ) -> Result<usize, Errno> {
        // SAFETY: arguments the program passed to its own mmap call.
        let r = unsafe { real::mmap(addr as *mut _, len, prot, flags, fd, off as libc::off_t) };
        if r == libc::MAP_FAILED {
            Err(errno::get())
        } else {
            Ok(r as usize)
        }
    }

    fn munmap(&self, addr: usize, len: usize) -> Result<(), Errno> {
        // SAFETY: either the program's own munmap arguments, or a range
        // munmapq mapped for the program and now owns alone.
        int_result(unsafe { real::munmap(addr as *mut _, len) }).map(drop)
    }

    fn readable_file(&self, fd: i32) -> Option<FileFacts> {
        let facts = regular_file_facts(fd)?;
        readable_open_flags(get_fl(fd), PATH_ONLY).then_some(facts)
    }

    fn usage(&self) -> Option<Usage> {
        crate::usage::usage()
    }

    fn map_count(&self) -> Option<usize> {
        crate::usage::map_count()
    }

    fn address_space_limit(&self) -> Option<usize> {
        crate::usage::address_space_limit()
    }

    #[cfg(target_os = "linux")]
    fn drop_pages(&self, addr: usize, len: usize) -> bool {
        // The raw system call: madvise is hooked. On a read-only private
        // file mapping never written (tracked entries are), MADV_DONTNEED
        // only removes the page-table entries; the next access faults the
        // file's pages in again (mm/madvise.c, madvise_dontneed_single_vma).
        // SAFETY: a queued range munmapq alone owns.
        unsafe { libc::syscall(libc::SYS_madvise, addr, len, libc::MADV_DONTNEED) == 0 }
    }

    /// macOS's MADV_DONTNEED only deactivates pages; the queue is bounded
    /// by unmapping instead.
    #[cfg(not(target_os = "linux"))]
    fn drop_pages(&self, _addr: usize, _len: usize) -> bool {
        false
    }

    #[cfg(target_os = "linux")]
    fn max_map_count(&self) -> Option<usize> {
        let mut buf = [0u8; 32];
        let n = read_small_file(c"/proc/sys/vm/max_map_count", &mut buf)?;
        let digits = buf[..n].split(|c| !c.is_ascii_digit()).next()?;
        munmapq_core::config::parse_uint(digits).map(|v| v as usize)
    }

    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    #[inline]
    fn thread_cells(&self) -> Option<&'static PerThread> {
        Some(crate::frames::cells())
    }

    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    fn thread_cells(&self) -> Option<&'static PerThread> {
        None
    }

    fn this_thread(&self) -> usize {
        // SAFETY: pthread_self has no preconditions; it reads the thread
        // pointer (no system call, async-signal-safe in practice on glibc
        // and macOS).
        unsafe { libc::pthread_self() as usize }
    }

    fn signal_stack(&self) -> SignalStack {
        // SAFETY: plain data, filled in by the kernel.
        let mut ss: libc::stack_t = unsafe { core::mem::zeroed() };
        // SAFETY: a NULL new stack only queries; `ss` is a valid out-pointer.
        if unsafe { libc::sigaltstack(core::ptr::null(), &mut ss) } != 0 {
            return SignalStack::Unknown;
        }
        if ss.ss_flags & libc::SS_ONSTACK == 0 {
            return SignalStack::Elsewhere;
        }
        SignalStack::On {
            base: ss.ss_sp as usize,
            size: ss.ss_size,
        }
    }
}

#[cfg(target_os = "linux")]
fn read_small_file(path: &core::ffi::CStr, buf: &mut [u8]) -> Option<usize> {
    // SAFETY: `path` is NUL-terminated; `buf` is valid for its length; the
    // descriptor is ours and closed here.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        (n > 0).then_some(n as usize)
    }
}

// These run on every eligible mmap, so on Linux they are raw system calls
// (file_linux.rs for the file's facts): glibc's fstat is fstatat(fd, "",
// AT_EMPTY_PATH), which costs a path walk, and its fcntl decodes varargs.
// None is hooked, and all only read.
#[cfg(target_os = "linux")]
fn get_fl(fd: i32) -> i32 {
    // SAFETY: F_GETFL takes no argument; a bad fd only makes it fail.
    unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFL) as i32 }
}

#[cfg(target_os = "linux")]
use crate::file_linux::regular_file_facts;

/// Device, inode and stamp of `fd` if it is a regular file.
#[cfg(not(target_os = "linux"))]
fn regular_file_facts(fd: i32) -> Option<FileFacts> {
    // SAFETY: `stat` is plain data; fstat writes it or fails.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: a valid out-pointer; a bad fd only makes the call fail.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    // XNU has no copy-up filesystem (`bsd/miscfs/union/` holds only a
    // header), so what fstat says is what a mapping shows.
    Some(facts_of(&st))
}

/// What `fstat` said, as the engine keeps it.
// The stat fields' widths differ between targets.
#[allow(clippy::unnecessary_cast)]
pub fn facts_of(st: &libc::stat) -> FileFacts {
    FileFacts {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
        stamp: munmapq_core::file::FileStamp {
            size: st.st_size as i64,
            mtime_sec: st.st_mtime as i64,
            mtime_nsec: st.st_mtime_nsec as i64,
            ctime_sec: st.st_ctime as i64,
            ctime_nsec: st.st_ctime_nsec as i64,
        },
    }
}

#[cfg(not(target_os = "linux"))]
fn get_fl(fd: i32) -> i32 {
    // SAFETY: F_GETFL takes no argument; a bad fd only makes it fail.
    unsafe { libc::fcntl(fd, libc::F_GETFL) }
}

/// `-1` + errno -> `Err(errno)`.
pub fn int_result(r: libc::c_int) -> Result<libc::c_int, Errno> {
    if r == -1 {
        Err(errno::get())
    } else {
        Ok(r)
    }
}
