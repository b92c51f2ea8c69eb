//! macOS: the real functions are libSystem's, called directly (dyld does
//! not interpose the image that holds the interpose table): a function of
//! each hook's name and C signature (`hook_table!`) that calls libSystem's.

use libc::{c_char, c_int, c_uint, c_void, off_t, pid_t, size_t};
use libc::{
    kern_return_t, mach_vm_address_t, mach_vm_size_t, vm_address_t, vm_inherit_t, vm_map_t,
    vm_prot_t, vm_size_t,
};
use libsystem::vm_behavior_t;

/// This task's own port.
pub fn task_self() -> libc::mach_port_t {
    // SAFETY: a read of a word libSystem sets before any image initializer
    // runs and changes only in a forked child, before any of its code.
    unsafe { core::ptr::addr_of!(libsystem::mach_task_self_).read() }
}

/// libSystem's functions: the libc crate's declarations, and the Mach calls
/// and non-cancelable variants it lacks.
pub mod libsystem {
    pub use libc::*;

    // The variants of the cancellation points munmapq calls for itself that
    // are not cancellation points: the names a program compiled with
    // `__DARWIN_NON_CANCELABLE=1` binds (xnu `bsd/sys/cdefs.h`:
    // `__DARWIN_ALIAS_C(sym)` appends `__DARWIN_SUF_NON_CANCELABLE`,
    // "$NOCANCEL"). In the kernel `sys_fcntl`, `open`, `write` and `sys_close`
    // call `__pthread_testcancel(1)` (`bsd/kern/kern_descrip.c`,
    // `bsd/vfs/vfs_syscalls.c`, `bsd/kern/sys_generic.c`), their `_nocancel`
    // syscalls do not: called from a hook with a cancel pending, the
    // cancelable one would end the thread inside the program's mmap.
    extern "C" {
        /// xnu `libsyscall/wrappers/cancelable/fcntl.c` (fcntl-base.c built
        /// on `__fcntl_nocancel`); fcntl-cancel.c is the cancelable `fcntl`.
        #[link_name = "fcntl$NOCANCEL"]
        pub fn fcntl_nocancel(fd: c_int, cmd: c_int, ...) -> c_int;

        /// xnu `libsyscall/wrappers/open-base.c`: `open$NOCANCEL` calls
        /// `__open_nocancel` (syscall 398).
        #[link_name = "open$NOCANCEL"]
        pub fn open_nocancel(path: *const c_char, oflag: c_int, ...) -> c_int;

        /// xnu `libsyscall/Platforms/MacOSX/{arm64,x86_64}/syscall.map`:
        /// `_write$NOCANCEL ___write_nocancel` (syscall 397).
        #[link_name = "write$NOCANCEL"]
        pub fn write_nocancel(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t;

        /// Same map: `_close$NOCANCEL ___close_nocancel`.
        #[link_name = "close$NOCANCEL"]
        pub fn close_nocancel(fd: c_int) -> c_int;
    }

    // The entry points beside `mmap`, `munmap` and `msync` that a program
    // can bind to (see `hooks.rs` for why each is interposed).
    extern "C" {
        /// The raw system call stub `mmap` calls (xnu
        /// `libsyscall/wrappers/unix03/mmap.c`): `bsd/kern/syscalls.master`
        /// marks mmap `NO_SYSCALL_STUB`, so
        /// `libsyscall/xcodescripts/create-syscalls.pl` names its stub
        /// `___mmap`, and `custom/SYS.h`'s `PSEUDO` makes it `.globl`
        /// (libsyscall has no export list: it is exported).
        pub fn __mmap(
            addr: *mut c_void,
            len: size_t,
            prot: c_int,
            flags: c_int,
            fd: c_int,
            off: off_t,
        ) -> *mut c_void;

        /// The raw stub `munmap` calls (`libsyscall/wrappers/unix03/munmap.c`),
        /// `___munmap` as `___mmap` is.
        pub fn __munmap(addr: *mut c_void, len: size_t) -> c_int;

        /// Its own system call, 405 `msync_nocancel` (`syscalls.master`),
        /// exported as `_msync$NOCANCEL` (`libsyscall/Platforms/MacOSX/
        /// {arm64,x86_64}/syscall.map`: `_msync$NOCANCEL ___msync_nocancel`),
        /// not an alias of `msync` (`_msync ___msync`, syscall 65).
        #[link_name = "msync$NOCANCEL"]
        pub fn msync_nocancel(addr: *mut c_void, len: size_t, flags: c_int) -> c_int;
    }

    extern "C" {
        /// Libc `sys/fork.c` (the libc crate declares it for Linux only).
        pub fn vfork() -> pid_t;

        /// The main executable's Mach-O header (Libc `sys/crt_externs.c`).
        pub fn _NSGetMachExecuteHeader() -> *const MachHeader64;
    }

    extern "C" {
        /// The Carbon-era `delete` (xnu `libsyscall/wrappers/carbon_delete.c`:
        /// `__carbon_delete` calls the raw `__delete`, system call 226,
        /// "private delete (Carbon semantics)" in `bsd/kern/syscalls.master`,
        /// and counts a removal). There is no `_delete` in libSystem: this
        /// is the name that resolves.
        pub fn __carbon_delete(path: *const c_char) -> c_int;
    }

    /// `struct mach_header_64` of `<mach-o/loader.h>` (the libc crate's is
    /// deprecated), and its magic.
    #[repr(C)]
    #[allow(dead_code)] // the C layout: only some fields are read
    pub struct MachHeader64 {
        pub magic: u32,
        pub cputype: i32,
        pub cpusubtype: i32,
        pub filetype: u32,
        pub ncmds: u32,
        pub sizeofcmds: u32,
        pub flags: u32,
        pub reserved: u32,
    }
    pub const MH_MAGIC_64: u32 = 0xfeed_facf;

    /// xnu `osfmk/mach/vm_behavior.h` (the libc crate lacks it).
    #[allow(non_camel_case_types)]
    pub type vm_behavior_t = c_int;

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

        /// MIG routines of libsystem_kernel (xnu `osfmk/mach/vm_map.defs`,
        /// `mach_vm.defs`): four functions, no two one address.
        pub fn vm_inherit(
            target: vm_map_t,
            address: vm_address_t,
            size: vm_size_t,
            new_inheritance: vm_inherit_t,
        ) -> kern_return_t;
        pub fn mach_vm_inherit(
            target: vm_map_t,
            address: mach_vm_address_t,
            size: mach_vm_size_t,
            new_inheritance: vm_inherit_t,
        ) -> kern_return_t;
        pub fn vm_behavior_set(
            target: vm_map_t,
            address: vm_address_t,
            size: vm_size_t,
            new_behavior: vm_behavior_t,
        ) -> kern_return_t;
        pub fn mach_vm_behavior_set(
            target: vm_map_t,
            address: mach_vm_address_t,
            size: mach_vm_size_t,
            new_behavior: vm_behavior_t,
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

/// `RTLD_DEFAULT` of the macOS SDK's `<dlfcn.h>`: `((void *) -2)`.
const RTLD_DEFAULT: *mut c_void = -2isize as *mut c_void;

/// The `mmap` the program's calls bind to: the first image in load order
/// that exports it, with dyld's interposing applied to the answer (dyld
/// `DyldAPIs.cpp` `APIs::dlsym`, `RTLD_DEFAULT`; `Loader.cpp`
/// `hasExportedSymbol`: `targetAddressForDlsym = interpose(state, ...)`).
/// This image exports no bare `_mmap`, so that is libSystem's, or the hook
/// when dyld applied this image's `__interpose` pairs. Load time only.
fn first_mmap() -> usize {
    // SAFETY: dlsym with a NUL-terminated name and a handle dyld accepts.
    unsafe { libsystem::dlsym(RTLD_DEFAULT, c"mmap".as_ptr()) as usize }
}

/// Whether the program's calls reach the hooks: the `mmap` they bind to
/// (`first_mmap`) is not libSystem's own (`next_mmap`). Load time only.
/// Only when dyld answers `dlsym` for `mmap` (`dlsym_answered`): where the
/// main executable disabled it, asking would halt the process or answer
/// NULL, and the library cannot tell, so it stays off. A NULL answer is
/// not taken for the hook either.
pub fn interposed() -> bool {
    if !dlsym_answered() {
        return false;
    }
    let first = first_mmap();
    first != 0 && first != next_mmap()
}

/// Whether the main executable's `LC_DYLD_ENVIRONMENT` commands leave
/// `dlsym(RTLD_DEFAULT, "mmap")` answered (`munmapq_core::dyld_env`: the
/// `DYLD_DLSYM_RESULT` dyld-1160 and later honour). The header is
/// libSystem's record of it (Libc `sys/crt_externs.c`:
/// `_NSGetMachExecuteHeader` returns what `_program_vars_init` got from
/// dyld in `libSystem_initializer`, which runs before an inserted
/// library's initializers): no lookup through dyld.
fn dlsym_answered() -> bool {
    // SAFETY: no arguments; libSystem set the pointer before any inserted
    // image's initializer runs.
    let mh = unsafe { libsystem::_NSGetMachExecuteHeader() };
    if mh.is_null() {
        return false;
    }
    // SAFETY: the main executable's header, mapped for the process's
    // life; dyld validated its load commands before running it.
    let head = unsafe { mh.read() };
    if head.magic != libsystem::MH_MAGIC_64 {
        return false;
    }
    // SAFETY: `sizeofcmds` bytes of load commands follow the 64-bit
    // header (`<mach-o/loader.h>`), mapped with it.
    let cmds = unsafe {
        core::slice::from_raw_parts(
            mh.cast::<u8>()
                .add(core::mem::size_of::<libsystem::MachHeader64>()),
            head.sizeofcmds as usize,
        )
    };
    munmapq_core::dyld_env::dlsym_answered(cmds, head.ncmds, b"mmap")
}

/// libSystem's `mmap`, as this image binds it (dyld never rebinds the
/// interposing image's own references: `appendInterposingTuples` maps the
/// replacee to itself for it): where the program's calls go when dyld
/// applies no interposing.
fn next_mmap() -> usize {
    libsystem::mmap as *const () as usize
}
