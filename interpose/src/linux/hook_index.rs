//! Every Linux hook of `hook_table!` by its C name, wherever its body
//! lives: what `exports.rs` calls. Only names (and glibc's other names of
//! hooked functions, mmap64 and the like), no code: the files below
//! may call each other's hooks (`syscall.rs` routes to them) without going
//! through this index.

pub use super::children::*;
pub use super::hooks::*;
pub use super::lastclose::*;

use super::signatures::{args, ret};
// The shared hook mmap64 runs (`exports.rs` reaches it as `hooks.rs`'s).
use crate::hooks::mmap;

/// Each of glibc's other names of a hooked function runs the hook of that
/// function with the same arguments (`hook_table!` gives both names the
/// same types): `ALIAS => HOOK { ARGUMENTS }`.
macro_rules! other_names {
    ($($alias:ident => $hook:ident { $($arg:ident),* };)*) => {$(
        /// glibc's other name for the function of the hook it runs.
        ///
        /// # Safety
        /// As for that C function.
        #[inline(always)]
        #[allow(non_snake_case)]
        pub unsafe fn $alias(args::$alias { $($arg),* }: args::$alias) -> ret::$alias {
            // SAFETY: the caller's own arguments, of the same types.
            unsafe { $hook(args::$hook { $($arg),* }) }
        }
    )*};
}

other_names! {
    // The large-file name (on 64-bit targets `off64_t` is `off_t`).
    mmap64 => mmap { addr, len, prot, flags, fd, off };
    // Exported at a public version, so a program may link against them
    // (`__vfork` is in `table_owner.rs`).
    __close => close { fd };
    __dup2 => dup2 { old, new };
    _IO_fclose => fclose { fp };
    __clone => clone { f, stack, flags, arg, ptid, tls, ctid };
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
