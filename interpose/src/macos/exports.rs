//! macOS: dyld interposing. A `__DATA,__interpose` section of
//! `{replacement, original}` pairs; when `DYLD_INSERT_LIBRARIES` loads this
//! image, dyld rebinds every *other* image's references to `original` to
//! `replacement`. This image itself is not rebound, so the hooks reach
//! libSystem's real functions with plain calls (`real.rs`): no dlsym.
//! `original` must be libSystem's symbol itself (an import), not a local
//! forwarder: dyld matches the pair by the address it binds there.
//! Nothing is exported under a bare C name (the hooks are Rust-mangled).
//!
//! The table holds one pair for each entry of `hook_table!`, in its order:
//! the shared hooks of `hooks.rs`, then macOS's own of `macos/hooks.rs`.
//! Each replacement is a function of this module generated from the entry,
//! the only `extern "C"` function of the hook's name, which runs its body.
//! `posix_madvise` is left out: libSystem defines it as an alias of
//! `madvise` (xnu libsyscall/Platforms/syscall.map has
//! `_posix_madvise ___madvise`, which libsyscall/xcodescripts/create-syscalls.pl
//! turns into `.set _posix_madvise, _madvise`), so both originals would be one
//! address and dyld would keep one of the two pairs for every `madvise`.
//! scripts/inspect_macho.py refuses a table with aliased originals.

use super::hooks as macos_hooks;
use super::real::libsystem::{self, vm_behavior_t};
use super::signatures::args;
use crate::hooks as shared_hooks;
use libc::{c_char, c_int, c_uint, c_void, off_t, pid_t, size_t};
use libc::{
    kern_return_t, mach_vm_address_t, mach_vm_size_t, vm_address_t, vm_inherit_t, vm_map_t,
    vm_prot_t, vm_size_t,
};

#[repr(C)]
pub struct Interpose {
    replacement: *const c_void,
    original: *const c_void,
}

// SAFETY: the table is immutable data that only dyld reads.
unsafe impl Sync for Interpose {}

/// The `__DATA,__interpose` table of `hook_table!`'s hooks (the Linux
/// stand-ins of the shared entries do not apply), and its replacements.
macro_rules! interpose_table {
    (shared { $( $name:ident $args:tt -> $ret:ty, [$($linux:tt)*]; )* }
     platform { $( $own:ident $own_args:tt -> $own_ret:ty; )* }) => {
        interpose_table!(@all $( shared_hooks $name $args -> $ret; )* $( macos_hooks $own $own_args -> $own_ret; )*);
    };
    (@all $( $hooks:ident $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty; )*) => {
        $(
            /// The replacement of this name in the table: the C function,
            /// with its table entry's signature, around the hook's body
            /// (which takes `args::NAME`). Rust-mangled, not exported.
            ///
            /// # Safety
            /// As for the C function of the same name.
            #[allow(non_snake_case, clippy::too_many_arguments)]
            unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                // SAFETY: the caller's own arguments, forwarded.
                unsafe { $hooks::$name(args::$name { $($arg),* }) }
            }
        )*

        /// One pair per hook, read by dyld at load time.
        #[used]
        #[link_section = "__DATA,__interpose"]
        pub static INTERPOSE: [Interpose; [$(stringify!($name)),*].len()] = [
            $(
                Interpose {
                    replacement: $name as unsafe extern "C" fn($($ty),*) -> $ret as *const c_void,
                    // libSystem's own function: a bind dyld resolves.
                    original: libsystem::$name as *const c_void,
                },
            )*
        ];
    };
}

super::hook_table!(interpose_table);
