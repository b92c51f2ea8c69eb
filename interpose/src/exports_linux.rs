//! Linux (glibc): the hooks exported under their C names, found first by
//! the dynamic linker because `LD_PRELOAD` puts this library first.

use libc::{c_int, c_void, off_t, size_t};

macro_rules! export {
    ($( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        $(
            /// # Safety
            /// As for the C function of the same name.
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                // SAFETY: the caller's own arguments, forwarded.
                unsafe { crate::hooks::$name($($arg),*) }
            }
        )*
    };
}

crate::common_hooks!(export);

/// Exports for the Linux-only hooks of `hooks_linux.rs`.
macro_rules! export_linux {
    ($( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        $(
            /// # Safety
            /// As for the C function of the same name.
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                // SAFETY: the caller's own arguments, forwarded.
                unsafe { crate::hooks_linux::$name($($arg),*) }
            }
        )*
    };
}

export_linux! {
    pkey_mprotect(addr: *mut c_void, len: size_t, prot: c_int, pkey: c_int) -> c_int;
    shmat(id: c_int, addr: *const c_void, flags: c_int) -> *mut c_void;
    // Exported even where glibc lacks it (then nothing calls it by name, and
    // a program that finds it with dlsym gets the hooked system call).
    mseal(addr: *mut c_void, len: size_t, flags: libc::c_ulong) -> c_int;
}

export! {
    posix_madvise(addr: *mut c_void, len: size_t, advice: c_int) -> c_int;
    mlock2(addr: *const c_void, len: size_t, flags: libc::c_uint) -> c_int;
    // mremap is variadic in C (`...` holds new_address, read only with
    // MREMAP_FIXED). On the Linux ABIs munmapq builds for (x86_64, aarch64,
    // and every other 64-bit glibc target) a variadic pointer argument travels
    // in the same register as a fifth fixed one, so a five-argument
    // definition receives it.
    mremap(old: *mut c_void, old_size: size_t, new_size: size_t, flags: c_int, new_addr: *mut c_void) -> *mut c_void;
}

/// glibc's large-file name for mmap (git calls this one): on 64-bit targets
/// `off64_t` is `off_t`.
///
/// # Safety
/// As for C `mmap64`.
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    // SAFETY: the caller's own arguments, forwarded.
    unsafe { crate::hooks::mmap(addr, len, prot, flags, fd, off) }
}
