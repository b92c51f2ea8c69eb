//! The real functions: resolved once, at load time, with `dlsym(RTLD_NEXT)`
//! (so another preloaded library below us still sees its calls); before
//! that, and if a name does not resolve, the raw system call. Nothing here
//! is ever looked up from inside a hook.

use core::sync::atomic::Ordering;
use libc::{c_int, c_void, off_t, size_t};

macro_rules! real_functions {
    ($( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty = $fallback:expr ; )*) => {
        #[allow(non_upper_case_globals)]
        mod slots {
            use core::sync::atomic::AtomicUsize;
            $( pub static $name: AtomicUsize = AtomicUsize::new(0); )*
        }

        /// Resolves every real function. Called once, from the constructor.
        pub fn resolve() {
            $(
                // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds
                // the definition after this library (libc's, normally).
                let f = unsafe {
                    libc::dlsym(libc::RTLD_NEXT, concat!(stringify!($name), "\0").as_ptr().cast())
                };
                slots::$name.store(f as usize, Ordering::Release);
            )*
        }

        $(
            /// Calls the real function (the raw syscall before `resolve`).
            ///
            /// # Safety
            /// The caller passes what the C function accepts.
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                let f = slots::$name.load(Ordering::Acquire);
                if f == 0 {
                    return $fallback;
                }
                // SAFETY: `f` came from dlsym for this exact C function, whose
                // prototype is the one declared here.
                let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { core::mem::transmute(f) };
                // SAFETY: forwarded from our caller's contract.
                unsafe { f($($arg),*) }
            }
        )*
    };
}

// SAFETY (for every fallback below): a raw syscall with the same arguments
// the libc wrapper would pass; the kernel validates them.
real_functions! {
    mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_mmap, addr, len, prot, flags, fd, off) as *mut c_void };
    munmap(addr: *mut c_void, len: size_t) -> c_int =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_munmap, addr, len) as c_int };
    mprotect(addr: *mut c_void, len: size_t, prot: c_int) -> c_int =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_mprotect, addr, len, prot) as c_int };
    madvise(addr: *mut c_void, len: size_t, advice: c_int) -> c_int =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_madvise, addr, len, advice) as c_int };
    posix_madvise(addr: *mut c_void, len: size_t, advice: c_int) -> c_int =
        posix_madvise_fallback(addr, len, advice);
    mremap(old: *mut c_void, old_size: size_t, new_size: size_t, flags: c_int, new_addr: *mut c_void) -> *mut c_void =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_mremap, old, old_size, new_size, flags, new_addr) as *mut c_void };
    mlock(addr: *const c_void, len: size_t) -> c_int =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_mlock, addr, len) as c_int };
    mlock2(addr: *const c_void, len: size_t, flags: libc::c_uint) -> c_int =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_mlock2, addr, len, flags) as c_int };
    munlock(addr: *const c_void, len: size_t) -> c_int =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_munlock, addr, len) as c_int };
    mlockall(flags: c_int) -> c_int =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_mlockall, flags) as c_int };
    munlockall() -> c_int =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_munlockall) as c_int };
    msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_msync, addr, len, flags) as c_int };
    mincore(addr: *mut c_void, len: size_t, vec: *mut c_void) -> c_int =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_mincore, addr, len, vec) as c_int };
    pkey_mprotect(addr: *mut c_void, len: size_t, prot: c_int, pkey: c_int) -> c_int =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_pkey_mprotect, addr, len, prot, pkey) as c_int };
    shmat(id: c_int, addr: *const c_void, flags: c_int) -> *mut c_void =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_shmat, id, addr, flags) as *mut c_void };
    // Newer glibc wraps mseal (libc-alpha, "linux: Add mseal syscall
    // support", 2025); older ones, like this project's 2.36, have no such
    // name, so it does not resolve and the raw system call is used.
    mseal(addr: *mut c_void, len: size_t, flags: libc::c_ulong) -> c_int =
        // SAFETY: the raw syscall, as said above.
        unsafe { libc::syscall(libc::SYS_mseal, addr, len, flags) as c_int };
}

/// glibc's posix_madvise: DONTNEED is ignored, errors are returned, not set.
fn posix_madvise_fallback(addr: *mut c_void, len: size_t, advice: c_int) -> c_int {
    if advice == libc::POSIX_MADV_DONTNEED {
        return 0;
    }
    // SAFETY: see the block above.
    match unsafe { libc::syscall(libc::SYS_madvise, addr, len, advice) } {
        0 => 0,
        _ => crate::errno::get(),
    }
}
