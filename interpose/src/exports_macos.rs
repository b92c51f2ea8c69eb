//! macOS: dyld interposing. A `__DATA,__interpose` section of
//! `{replacement, original}` pairs; when `DYLD_INSERT_LIBRARIES` loads this
//! image, dyld rebinds every *other* image's references to `original` to
//! `replacement`. This image itself is not rebound, so the hooks reach
//! libSystem's real functions with plain calls (`real_macos.rs`): no dlsym.
//! `original` must be libSystem's symbol itself (an import), not a local
//! forwarder: dyld matches the pair by the address it binds there.
//! Nothing is exported under a bare C name (the hooks are Rust-mangled).
//!
//! The table is generated from [`crate::common_hooks!`], the same list the
//! Linux exports come from, followed by [`crate::macos_only_hooks!`]; macOS has no `mmap64`, `mremap`, `mlock2` or
//! `MAP_FIXED_NOREPLACE`. `posix_madvise` is left out: libSystem defines it
//! as an alias of `madvise` (xnu libsyscall/Platforms/syscall.map has
//! `_posix_madvise ___madvise`, which libsyscall/xcodescripts/create-syscalls.pl
//! turns into `.set _posix_madvise, _madvise`), so both originals would be one
//! address and dyld would keep one of the two pairs for every `madvise`.
//! scripts/inspect_macho.py refuses a table with aliased originals.

use libc::{c_int, c_void, off_t, size_t};
use libc::{
    kern_return_t, mach_vm_address_t, mach_vm_size_t, vm_address_t, vm_map_t, vm_prot_t, vm_size_t,
};

#[repr(C)]
pub struct Interpose {
    replacement: *const c_void,
    original: *const c_void,
}

// SAFETY: the table is immutable data that only dyld reads.
unsafe impl Sync for Interpose {}

macro_rules! interpose_table {
    ($( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        /// One pair per hook, read by dyld at load time.
        #[used]
        #[link_section = "__DATA,__interpose"]
        pub static INTERPOSE: [Interpose; [$(stringify!($name)),*].len()] = [
            $(
                Interpose {
                    replacement: crate::hooks::$name as unsafe extern "C" fn($($ty),*) -> $ret as *const c_void,
                    // libSystem's own function: a bind dyld resolves.
                    original: crate::real::libsystem::$name as *const c_void,
                },
            )*
        ];
    };
}

/// Invokes `$m!` with the given hooks followed by those only macOS has: the
/// Mach calls that unmap as munmap does, or change protections as mprotect
/// does (xnu `libsyscall/mach/mach_vm.c`: `vm_deallocate` and `vm_protect`
/// call their `mach_vm_` versions inside libSystem, so all four are
/// interposed; `boolean_t` is an `int`). scripts/inspect_macho.py reads
/// this list too.
#[macro_export]
macro_rules! macos_only_hooks {
    ($m:ident, $($common:tt)*) => {
        $m! {
            $($common)*
            vm_deallocate(task: vm_map_t, address: vm_address_t, size: vm_size_t) -> kern_return_t;
            mach_vm_deallocate(task: vm_map_t, address: mach_vm_address_t, size: mach_vm_size_t) -> kern_return_t;
            vm_protect(task: vm_map_t, address: vm_address_t, size: vm_size_t, set_maximum: c_int, new_protection: vm_prot_t) -> kern_return_t;
            mach_vm_protect(task: vm_map_t, address: mach_vm_address_t, size: mach_vm_size_t, set_maximum: c_int, new_protection: vm_prot_t) -> kern_return_t;
        }
    };
}

macro_rules! with_macos_only_hooks {
    ($($common:tt)*) => {
        crate::macos_only_hooks!(interpose_table, $($common)*);
    };
}

crate::common_hooks!(with_macos_only_hooks);
