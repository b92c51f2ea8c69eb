//! macOS: the real functions are libSystem's, called directly (dyld does
//! not interpose the image that holds the interpose table): a function of
//! each hook's name and C signature (`hook_table!`) that calls libSystem's.

use libc::{c_int, c_void, off_t, size_t};
use libc::{
    kern_return_t, mach_vm_address_t, mach_vm_size_t, vm_address_t, vm_map_t, vm_prot_t, vm_size_t,
};

/// This task's own port.
pub fn task_self() -> libc::mach_port_t {
    // SAFETY: a read of a word libSystem sets before any image initializer
    // runs and changes only in a forked child, before any of its code.
    unsafe { core::ptr::addr_of!(libsystem::mach_task_self_).read() }
}

/// libSystem's functions: the libc crate's declarations, and the Mach calls
/// it lacks.
pub mod libsystem {
    pub use libc::*;

    extern "C" {
        /// This task's own port, what the `mach_task_self()` macro reads
        /// (xnu `libsyscall/mach/mach_init.c`; reset in a forked child).
        pub static mut mach_task_self_: mach_port_t;

        /// xnu `osfmk/mach/mach_vm.defs`; libSystem's `libsyscall/mach/mach_vm.c`.
        pub fn mach_vm_deallocate(
            target: vm_map_t,
            address: mach_vm_address_t,
            size: mach_vm_size_t,
        ) -> kern_return_t;

        /// xnu `libsyscall/mach/mach_vm.c`.
        pub fn vm_protect(
            target: vm_map_t,
            address: vm_address_t,
            size: vm_size_t,
            set_maximum: c_int,
            new_protection: vm_prot_t,
        ) -> kern_return_t;

        /// xnu `osfmk/mach/mach_vm.defs`; libSystem's `libsyscall/mach/mach_vm.c`.
        pub fn mach_vm_protect(
            target: vm_map_t,
            address: mach_vm_address_t,
            size: mach_vm_size_t,
            set_maximum: c_int,
            new_protection: vm_prot_t,
        ) -> kern_return_t;
    }
}

/// Nothing to resolve on macOS.
pub fn resolve() {}

/// For each entry of `hook_table!`, a function of its name that calls
/// libSystem's (the Linux stand-ins of the shared entries do not apply).
macro_rules! real_functions {
    (shared { $( $name:ident $args:tt -> $ret:ty, [$($linux:tt)*]; )* } platform { $($platform:tt)* }) => {
        real_functions!(@all $( $name $args -> $ret; )* $($platform)*);
    };
    (@all $( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty; )*) => {
        $(
            /// Calls libSystem's function.
            ///
            /// # Safety
            /// As for the C function of the same name.
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                // SAFETY: the caller's own arguments; pointer parameters are
                // passed on unchanged (mincore's `char *` is `*mut c_void` here).
                unsafe { libsystem::$name($($arg as _),*) }
            }
        )*
    };
}

super::hook_table!(real_functions);
