//! The engine's view of the real system.

use crate::{errno, real};
use munmapq_core::engine::{Errno, Os};
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

    fn readable_file(&self, fd: i32) -> Option<(u64, u64)> {
        // SAFETY: `stat` is plain data; fstat writes it or fails.
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        if fstat(fd, &mut st) != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return None;
        }
        let fl = get_fl(fd);
        if fl < 0 || fl & libc::O_ACCMODE == libc::O_WRONLY || is_path_only(fl) {
            return None;
        }
        Some((st.st_dev as u64, st.st_ino as u64))
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
}

// These two run on every eligible mmap, so on Linux they are the raw
// system calls: glibc's fstat is fstatat(fd, "", AT_EMPTY_PATH), which
// costs a path walk, and its fcntl decodes varargs. Neither is hooked, and
// both only read.
#[cfg(target_os = "linux")]
fn fstat(fd: i32, st: &mut libc::stat) -> libc::c_long {
    // SAFETY: a valid out-pointer; a bad fd only makes the call fail.
    unsafe { libc::syscall(libc::SYS_fstat, fd, st as *mut libc::stat) }
}

#[cfg(target_os = "linux")]
fn get_fl(fd: i32) -> i32 {
    // SAFETY: F_GETFL takes no argument; a bad fd only makes it fail.
    unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFL) as i32 }
}

#[cfg(not(target_os = "linux"))]
fn fstat(fd: i32, st: &mut libc::stat) -> libc::c_long {
    // SAFETY: a valid out-pointer; a bad fd only makes the call fail.
    unsafe { libc::fstat(fd, st) as libc::c_long }
}

#[cfg(not(target_os = "linux"))]
fn get_fl(fd: i32) -> i32 {
    // SAFETY: F_GETFL takes no argument; a bad fd only makes it fail.
    unsafe { libc::fcntl(fd, libc::F_GETFL) }
}

#[cfg(target_os = "linux")]
fn is_path_only(fl: i32) -> bool {
    fl & libc::O_PATH != 0
}

#[cfg(not(target_os = "linux"))]
fn is_path_only(_fl: i32) -> bool {
    false
}

/// `-1` + errno -> `Err(errno)`.
pub fn int_result(r: libc::c_int) -> Result<libc::c_int, Errno> {
    if r == -1 {
        Err(errno::get())
    } else {
        Ok(r)
    }
}
