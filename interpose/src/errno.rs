//! errno of the calling thread, and C results read with it.

#[cfg(target_os = "linux")]
#[inline(always)]
fn location() -> *mut libc::c_int {
    // SAFETY: always valid for the calling thread.
    unsafe { libc::__errno_location() }
}

#[cfg(target_os = "macos")]
#[inline(always)]
fn location() -> *mut libc::c_int {
    // SAFETY: always valid for the calling thread.
    unsafe { libc::__error() }
}

/// The calling thread's errno as a hook found it, with its place looked
/// up once: putting it back, or setting the kernel's, is one store.
#[derive(Clone, Copy)]
pub struct Saved {
    at: *mut libc::c_int,
    value: libc::c_int,
}

impl Saved {
    #[inline(always)]
    pub fn now() -> Saved {
        let at = location();
        // SAFETY: the calling thread's errno, valid as long as the thread.
        let value = unsafe { *at };
        Saved { at, value }
    }

    /// errno back to what it was when saved.
    #[inline(always)]
    pub fn restore(self) {
        self.set(self.value);
    }

    /// errno set to `v`.
    #[inline(always)]
    pub fn set(self, v: libc::c_int) {
        // SAFETY: as in `now`; a hook runs on the thread that saved it.
        unsafe { *self.at = v }
    }
}

pub fn get() -> libc::c_int {
    // SAFETY: `location` points at this thread's errno.
    unsafe { *location() }
}

pub fn set(v: libc::c_int) {
    // SAFETY: `location` points at this thread's errno.
    unsafe { *location() = v }
}

/// `-1` + errno -> `Err(errno)`.
pub fn int_result(r: libc::c_int) -> Result<libc::c_int, munmapq_core::os::Errno> {
    if r == -1 {
        Err(get())
    } else {
        Ok(r)
    }
}

/// An address, or `(void *) -1` (`MAP_FAILED`) + errno -> `Err(errno)`.
pub fn addr_result(p: *mut libc::c_void) -> Result<usize, munmapq_core::os::Errno> {
    if p == libc::MAP_FAILED {
        Err(get())
    } else {
        Ok(p as usize)
    }
}

/// The common errors of opening a file, as `strerror` says them in lower
/// case (without calling it: not async-signal-safe, and it may allocate
/// for a locale).
pub fn phrase(e: libc::c_int) -> &'static [u8] {
    match e {
        libc::EACCES => b"permission denied",
        libc::EPERM => b"operation not permitted",
        libc::ENOENT => b"no such file or directory",
        libc::ENOTDIR => b"not a directory",
        libc::EISDIR => b"is a directory",
        libc::EROFS => b"read-only file system",
        libc::ENOSPC => b"no space left on device",
        libc::ELOOP => b"too many levels of symbolic links",
        libc::ENAMETOOLONG => b"file name too long",
        libc::EMFILE | libc::ENFILE => b"too many open files",
        _ => b"cannot be opened",
    }
}
