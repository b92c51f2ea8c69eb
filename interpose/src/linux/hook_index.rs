//! Every Linux hook of `hook_table!` by its C name, wherever its body
//! lives: what `exports.rs` calls. Only names (and mmap64), no code: the files below
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

/// Mount flags and personality: the context of an mmap (`context.rs`).
pub use super::context::{mount, mount_setattr, personality};
/// Memory policy and advice given by other means (`policy.rs`).
pub use super::policy::{mbind, process_madvise};
/// What the program sets up around itself (`sandbox.rs`).
pub use super::sandbox::{prctl, prlimit, prlimit64, setrlimit, setrlimit64};
/// libc's `syscall`, which routes what it would otherwise let past the
/// other hooks (`syscall.rs`).
pub use super::syscall::syscall;
