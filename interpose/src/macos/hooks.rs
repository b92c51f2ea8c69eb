//! macOS's own hooks (its `hook_table!` lists them), beyond the shared
//! ones of `hooks.rs`.
//!
//! `vm_deallocate` and `mach_vm_deallocate` unmap whatever lies in the
//! page-rounded range, as munmap does (xnu `osfmk/vm/vm_user.c`
//! `mach_vm_deallocate`). Without these hooks a tracked mapping freed that
//! way would stay a Live entry: a later munmap of the same range would queue
//! it, and a reuse could hand back an address where other memory now is.
//! `vm_protect` and `mach_vm_protect` change protections as mprotect does: a
//! tracked mapping made writable that way and written must not be reused.
//! All answer a `kern_return_t` and leave errno alone.

use super::os::RealOs;
use super::real;
use crate::{errno, ENGINE};
use libc::c_int;
use libc::{
    kern_return_t, mach_vm_address_t, mach_vm_size_t, vm_address_t, vm_map_t, vm_prot_t, vm_size_t,
};
use munmapq_core::engine::Effect;
use munmapq_core::os::Errno;

/// Releases what munmapq holds in the range (queued mappings are unmapped,
/// live ones stop being tracked), then makes the call; only for this task's
/// own map (another task's ranges are not ours).
fn on_own_range(
    task: vm_map_t,
    address: u64,
    size: u64,
    call: impl FnOnce() -> kern_return_t,
) -> kern_return_t {
    if task != real::task_self() {
        return call();
    }
    let saved = errno::get();
    let range = usize::try_from(address)
        .ok()
        .zip(usize::try_from(size).ok())
        .and_then(|(a, l)| ENGINE.span(a, l, Effect::Modify));
    let mut call = Some(call);
    let r = ENGINE.range_call(&RealOs, &[range], || {
        Ok::<_, Errno>(call.take().map_or(libc::KERN_FAILURE, |c| c()))
    });
    errno::set(saved);
    r.unwrap_or(libc::KERN_FAILURE)
}

/// # Safety
/// As for Mach's `vm_deallocate`.
pub unsafe extern "C" fn vm_deallocate(
    task: vm_map_t,
    address: vm_address_t,
    size: vm_size_t,
) -> kern_return_t {
    // SAFETY: the caller's own arguments.
    on_own_range(task, address as u64, size as u64, || unsafe {
        real::vm_deallocate(task, address, size)
    })
}

/// # Safety
/// As for Mach's `mach_vm_deallocate`.
pub unsafe extern "C" fn mach_vm_deallocate(
    task: vm_map_t,
    address: mach_vm_address_t,
    size: mach_vm_size_t,
) -> kern_return_t {
    // SAFETY: the caller's own arguments.
    on_own_range(task, address, size, || unsafe {
        real::mach_vm_deallocate(task, address, size)
    })
}

/// # Safety
/// As for Mach's `vm_protect`.
pub unsafe extern "C" fn vm_protect(
    task: vm_map_t,
    address: vm_address_t,
    size: vm_size_t,
    set_maximum: c_int,
    new_protection: vm_prot_t,
) -> kern_return_t {
    // SAFETY: the caller's own arguments.
    on_own_range(task, address as u64, size as u64, || unsafe {
        real::vm_protect(task, address, size, set_maximum, new_protection)
    })
}

/// # Safety
/// As for Mach's `mach_vm_protect`.
pub unsafe extern "C" fn mach_vm_protect(
    task: vm_map_t,
    address: mach_vm_address_t,
    size: mach_vm_size_t,
    set_maximum: c_int,
    new_protection: vm_prot_t,
) -> kern_return_t {
    // SAFETY: the caller's own arguments.
    on_own_range(task, address, size, || unsafe {
        real::mach_vm_protect(task, address, size, set_maximum, new_protection)
    })
}
