//! The engine's view of the real system.

use crate::{errno, real};
use munmapq_core::engine::{Errno, Os};
use munmapq_core::file::{readable_open_flags, FileFacts, FileStamp, PATH_ONLY};

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

    // The stat fields' widths differ between targets.
    #[allow(clippy::unnecessary_cast)]
    fn readable_file(&self, fd: i32) -> Option<FileFacts> {
        // SAFETY: `stat` is plain data; fstat writes it or fails.
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        if fstat(fd, &mut st) != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return None;
        }
        if !readable_open_flags(get_fl(fd), PATH_ONLY) || on_overlayfs(fd) {
            return None;
        }
        Some(FileFacts {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            stamp: FileStamp {
                size: st.st_size as i64,
                mtime_sec: st.st_mtime as i64,
                mtime_nsec: st.st_mtime_nsec as i64,
                ctime_sec: st.st_ctime as i64,
                ctime_nsec: st.st_ctime_nsec as i64,
            },
        })
    }

    fn peak_rss(&self) -> Option<usize> {
        // SAFETY: plain out-parameter.
        let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
        // SAFETY: valid out-pointer.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
            return None;
        }
        // Linux reports KiB, macOS bytes.
        let unit = if cfg!(target_os = "macos") { 1 } else { 1024 };
        Some((ru.ru_maxrss as usize).saturating_mul(unit))
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

/// Is `fd` a file of an overlayfs mount? Its mappings are not tracked:
/// a descriptor opened before a copy-up keeps mapping the lower file,
/// one opened after it maps the upper file, and `fstat` reports the same
/// device, inode, size and times through both (Linux
/// `Documentation/filesystems/overlayfs.rst`, "Non-standard behavior";
/// `fs/overlayfs/file.c` `ovl_mmap` maps the real file of the open file).
/// So no stamp can tell a reusable queued mapping from one of the old
/// lower file (tests/file_identity.rs reproduces it).
#[cfg(target_os = "linux")]
fn on_overlayfs(fd: i32) -> bool {
    const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;
    // SAFETY: `statfs` is plain data; fstatfs writes it or fails.
    let mut sf: libc::statfs = unsafe { core::mem::zeroed() };
    // SAFETY: a valid out-pointer; a bad fd only makes the call fail.
    if unsafe { libc::fstatfs(fd, &mut sf) } != 0 {
        return true; // unknown: do not track
    }
    // The type of `f_type` differs between targets.
    #[allow(clippy::unnecessary_cast)]
    let magic = sf.f_type as i64;
    magic == OVERLAYFS_SUPER_MAGIC
}

/// XNU has no copy-up filesystem: `bsd/miscfs/union/` holds only a header.
#[cfg(not(target_os = "linux"))]
fn on_overlayfs(_fd: i32) -> bool {
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
