//! macOS: dyld interposing (`exports.rs`); the real functions are
//! libSystem's, called directly, since dyld does not interpose the image
//! that holds the interpose table. See the crate's documentation for what
//! each module provides.

mod exports;
pub mod hooks;
pub mod os;
pub mod real;
pub(crate) mod signatures;

/// Every hook macOS has: `crate::shared_hooks!` and the Mach calls that
/// unmap as munmap does or change protections as mprotect does, whose
/// bodies are in `hooks.rs` (xnu `libsyscall/mach/mach_vm.c`:
/// `vm_deallocate` and `vm_protect` call their `mach_vm_` versions inside
/// libSystem, so all four are interposed; `boolean_t` is an `int`), and the
/// other entry points a program can bind to that map, unmap or sync without
/// going through the shared hooks' functions: the raw stubs `__mmap` and
/// `__munmap` and `msync$NOCANCEL` (see `hooks.rs`; Rust names the latter
/// `msync_nocancel`, `real.rs` gives its link name). Then the calls that
/// set what a fork child inherits of a range or how it is paged (BSD
/// `minherit`, Mach's `vm_inherit`/`mach_vm_inherit` and
/// `vm_behavior_set`/`mach_vm_behavior_set`, each its own MIG routine in
/// libsystem_kernel, xnu `osfmk/mach/vm_map.defs` and `mach_vm.defs`), and
/// `vfork`, a fork that skips the handlers the library registers. macOS
/// has no `mmap64`, `mremap`, `mlock2` or `MAP_FIXED_NOREPLACE`, and its
/// `posix_madvise` cannot be interposed apart from `madvise` (see
/// `exports.rs`). Then the calls that end a file's name or unmount a
/// volume (their bodies and why: `hooks.rs`); there is no close, dup or
/// lock hook on macOS, where a mapping keeps no open file.
/// scripts/inspect_macho.py reads this list (one entry a line).
macro_rules! hook_table {
    ($generate:ident) => {
        crate::shared_hooks! { $generate
            vm_deallocate(task: vm_map_t, address: vm_address_t, size: vm_size_t) -> kern_return_t;
            mach_vm_deallocate(task: vm_map_t, address: mach_vm_address_t, size: mach_vm_size_t) -> kern_return_t;
            vm_protect(task: vm_map_t, address: vm_address_t, size: vm_size_t, set_maximum: c_int, new_protection: vm_prot_t) -> kern_return_t;
            mach_vm_protect(task: vm_map_t, address: mach_vm_address_t, size: mach_vm_size_t, set_maximum: c_int, new_protection: vm_prot_t) -> kern_return_t;
            // What a fork child gets of a range, and how its pages are
            // paged (see `hooks.rs`).
            minherit(addr: *mut c_void, len: size_t, inherit: c_int) -> c_int;
            vm_inherit(task: vm_map_t, address: vm_address_t, size: vm_size_t, new_inheritance: vm_inherit_t) -> kern_return_t;
            mach_vm_inherit(task: vm_map_t, address: mach_vm_address_t, size: mach_vm_size_t, new_inheritance: vm_inherit_t) -> kern_return_t;
            vm_behavior_set(task: vm_map_t, address: vm_address_t, size: vm_size_t, new_behavior: vm_behavior_t) -> kern_return_t;
            mach_vm_behavior_set(task: vm_map_t, address: mach_vm_address_t, size: mach_vm_size_t, new_behavior: vm_behavior_t) -> kern_return_t;
            __mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void;
            __munmap(addr: *mut c_void, len: size_t) -> c_int;
            msync_nocancel(addr: *mut c_void, len: size_t, flags: c_int) -> c_int;
            // A fork without the pthread_atfork handlers (see `hooks.rs`).
            vfork() -> pid_t;
            // The end of a file's name or of a volume (see `hooks.rs`):
            // a queued mapping keeps the vnode's use count.
            unlink(path: *const c_char) -> c_int;
            unlinkat(dir: c_int, path: *const c_char, flags: c_int) -> c_int;
            rename(old: *const c_char, new: *const c_char) -> c_int;
            renameat(old_dir: c_int, old: *const c_char, new_dir: c_int, new: *const c_char) -> c_int;
            renamex_np(old: *const c_char, new: *const c_char, flags: c_uint) -> c_int;
            renameatx_np(old_dir: c_int, old: *const c_char, new_dir: c_int, new: *const c_char, flags: c_uint) -> c_int;
            unmount(target: *const c_char, flags: c_int) -> c_int;
            __carbon_delete(path: *const c_char) -> c_int;
        }
    };
}
use hook_table;
