//! macOS: dyld interposing (`exports.rs`); the real functions are
//! libSystem's, called directly, since dyld does not interpose the image
//! that holds the interpose table. See the crate's documentation for what
//! each module provides.

mod exports;
pub mod hooks;
pub mod os;
mod pages;
pub mod real;

/// Every hook macOS has: `crate::shared_hooks!` and the Mach calls that
/// unmap as munmap does or change protections as mprotect does, whose
/// bodies are in `hooks.rs` (xnu `libsyscall/mach/mach_vm.c`:
/// `vm_deallocate` and `vm_protect` call their `mach_vm_` versions inside
/// libSystem, so all four are interposed; `boolean_t` is an `int`), and the
/// other entry points a program can bind to that map, unmap or sync without
/// going through the shared hooks' functions: the raw stubs `__mmap` and
/// `__munmap` and `msync$NOCANCEL` (see `hooks.rs`; Rust names the latter
/// `msync_nocancel`, `real.rs` gives its link name). macOS
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
            __mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void;
            __munmap(addr: *mut c_void, len: size_t) -> c_int;
            msync_nocancel(addr: *mut c_void, len: size_t, flags: c_int) -> c_int;
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
