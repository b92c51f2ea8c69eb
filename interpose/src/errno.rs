//! errno of the calling thread.

#[cfg(target_os = "linux")]
fn location() -> *mut libc::c_int {
    // SAFETY: always valid for the calling thread.
    unsafe { libc::__errno_location() }
}

#[cfg(target_os = "macos")]
fn location() -> *mut libc::c_int {
    // SAFETY: always valid for the calling thread.
    unsafe { libc::__error() }
}

pub fn get() -> libc::c_int {
    // SAFETY: `location` points at this thread's errno.
    unsafe { *location() }
}

pub fn set(v: libc::c_int) {
    // SAFETY: `location` points at this thread's errno.
    unsafe { *location() = v }
}
