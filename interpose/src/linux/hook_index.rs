//! Every Linux hook of `hook_table!` by its C name, wherever its body
//! lives: what `exports.rs` calls. Only names (and glibc's other names of
//! hooked functions, mmap64 and the like), no code: the files below
//! may call each other's hooks (`syscall.rs` routes to them) without going
//! through this index.

pub use super::children::*;
pub use super::hooks::*;
pub use super::lastclose::*;

use super::signatures::{args, ret};

/// glibc's large-file name for mmap: mmap's hook (see `hook_table!`).
///
/// # Safety
/// As for C `mmap64`.
#[inline(always)]
pub unsafe fn mmap64(
    args::mmap64 {
        addr,
        len,
        prot,
        flags,
        fd,
        off,
    }: args::mmap64,
) -> ret::mmap64 {
    // SAFETY: the caller's own arguments, which `hook_table!` gives the
    // same types as mmap's.
    unsafe {
        crate::hooks::mmap(args::mmap {
            addr,
            len,
            prot,
            flags,
            fd,
            off,
        })
    }
}

/// glibc's other name for `close`: close's hook.
///
/// # Safety
/// As for C `close`.
#[inline(always)]
pub unsafe fn __close(args::__close { fd }: args::__close) -> ret::__close {
    // SAFETY: the caller's own arguments.
    unsafe { close(args::close { fd }) }
}

/// glibc's other name for `dup2`: dup2's hook.
///
/// # Safety
/// As for C `dup2`.
#[inline(always)]
pub unsafe fn __dup2(args::__dup2 { old, new }: args::__dup2) -> ret::__dup2 {
    // SAFETY: the caller's own arguments.
    unsafe { dup2(args::dup2 { old, new }) }
}

/// glibc's other name for `fclose`: fclose's hook.
///
/// # Safety
/// As for C `fclose`.
#[inline(always)]
#[allow(non_snake_case)]
pub unsafe fn _IO_fclose(args::_IO_fclose { fp }: args::_IO_fclose) -> ret::_IO_fclose {
    // SAFETY: the caller's own arguments.
    unsafe { fclose(args::fclose { fp }) }
}

/// glibc's other name for `fcntl`: fcntl's hook.
///
/// # Safety
/// As for C `fcntl`.
#[inline(always)]
pub unsafe fn __fcntl(args::__fcntl { fd, cmd, arg }: args::__fcntl) -> ret::__fcntl {
    // SAFETY: the caller's own arguments.
    unsafe { fcntl(args::fcntl { fd, cmd, arg }) }
}

/// glibc's other name for `clone`: clone's hook.
///
/// # Safety
/// As for glibc's `clone`.
#[inline(always)]
pub unsafe fn __clone(
    args::__clone {
        f,
        stack,
        flags,
        arg,
        ptid,
        tls,
        ctid,
    }: args::__clone,
) -> ret::__clone {
    // SAFETY: the caller's own arguments.
    unsafe {
        clone(args::clone {
            f,
            stack,
            flags,
            arg,
            ptid,
            tls,
            ctid,
        })
    }
}

/// Mount flags and personality: the context of an mmap (`context.rs`).
pub use super::context::{mount, mount_setattr, personality};
/// Memory policy and advice given by other means (`policy.rs`).
pub use super::policy::{mbind, process_madvise};
/// What the program sets up around itself (`sandbox.rs`).
pub use super::sandbox::{prctl, prlimit, prlimit64, setrlimit, setrlimit64};
/// libc's `syscall`, which routes what it would otherwise let past the
/// other hooks (`syscall.rs`).
pub use super::syscall::syscall;
