//! macOS: dropping the resident pages of a queued mapping and keeping the
//! mapping, by taking its protection to `PROT_NONE` and back to
//! `PROT_READ` (macOS's `MADV_DONTNEED` only deactivates pages: they stay
//! mapped and counted).
//!
//! What xnu (xnu-11417) does with the two calls, and why each step holds:
//!
//! - `mprotect` is libSystem's raw stub (`libsyscall/Platforms/MacOSX/
//!   {arm64,x86_64}/syscall.map`: `_mprotect ___mprotect`) and the kernel's
//!   `mprotect` (`bsd/kern/kern_mman.c`) never calls
//!   `__pthread_testcancel` (only `msync` there does): it is not a
//!   cancellation point, so there is no `$NOCANCEL` variant to prefer. It
//!   calls `mach_vm_protect(map, addr, len, set_maximum = false, prot)`
//!   (`osfmk/vm/vm_user.c`), that is `vm_map_protect`.
//! - `vm_map_protect` (`osfmk/vm/vm_map.c`) checks the whole range first
//!   (no hole, the new protection within each entry's `max_protection`),
//!   then clips the entries to the range and, with `set_max` false, sets
//!   only `current->protection`: `max_protection`, the entry's object,
//!   offset, `needs_copy` and inheritance are untouched, and the final
//!   `vm_map_simplify_entry` pass merges the clipped pieces back once the
//!   protections match again. When the protection changed it calls
//!   `pmap_protect_options` with it.
//! - `pmap_protect_options` with `VM_PROT_NONE` removes the translations:
//!   `osfmk/arm64/sptm/pmap/pmap.c` and `osfmk/arm/pmap/pmap.c` (any
//!   protection other than read, execute or read-write goes to
//!   `pmap_remove_options`), `osfmk/x86_64/pmap.c` (`prot ==
//!   VM_PROT_NONE` calls `pmap_remove_options`, whose work is
//!   `pmap_remove_range_options` in `osfmk/i386/pmap_x86_common.c`).
//! - The task's resident size falls: `pmap_remove_range_options` debits
//!   `task_ledgers.phys_mem` by the pages removed (arm64 and x86 alike),
//!   and `task_info(MACH_TASK_BASIC_INFO)` answers `resident_size` from
//!   that ledger's balance (`osfmk/kern/task.c`, `task_info`), which is
//!   what [`super::os::RealOs::usage`] reads.
//! - The pages themselves are not freed: the pmap layer only unlinks the
//!   translation (and the page's pv entry); the `vm_page` stays in its VM
//!   object. A private file mapping is mapped with `docow`
//!   (`bsd/kern/kern_mman.c` `mmap`, `MAP_PRIVATE`), so
//!   `vm_map_enter_mem_object_control` gives the entry a delayed copy of
//!   the vnode's object (`vm_object_copy_strategically`): an object empty
//!   of pages of its own as long as nobody writes, whose shadow is the
//!   file's object in the unified buffer cache. A mapping munmapq tracks
//!   is `PROT_READ` and was never written, so its resident pages are the
//!   file's cached pages (pages a writer of the file pushed into the copy
//!   object stay there, equally cached). Back at `PROT_READ`, the next
//!   touch faults: `vm_fault_page` (`osfmk/vm/vm_fault.c`) walks the
//!   shadow chain with `vm_page_lookup` and maps the cached page: no I/O,
//!   as for a fresh mapping of a cached file.
//! - Back to `PROT_READ`: `pmap_protect_options` never adds access
//!   (`osfmk/x86_64/pmap.c`'s comment: new permissions come from
//!   `pmap_enter` only; arm64 only lowers the existing translations, of
//!   which there are none now), so nothing is mapped again until touched.
//!
//! Failure. The first call changes nothing when it fails (the range is
//! checked whole before any entry changes). The second can only fail for
//! what the first would have refused (the range is munmapq's own, its
//! `max_protection` includes read since it was mapped `PROT_READ` and is
//! unchanged), except for the MAC policy check `mprotect` makes
//! (`mac_proc_check_mprotect`, `bsd/kern/kern_mman.c`) that a sandbox
//! could answer differently for `PROT_READ`; so the second attempt is the
//! Mach call (the `_kernelrpc_mach_vm_protect_trap` in
//! `osfmk/ipc/mach_kernelrpc.c` calls `mach_vm_protect` directly, without
//! that check). If that fails too the range stays `PROT_NONE` and `false`
//! is answered: the queue then falls back to unmapping its oldest
//! mappings. It is not unmapped here: the table would keep an entry for a
//! range that is free, and a mapping the system later placed there
//! (libmalloc's, say) would be unmapped by the queue's eviction. Left
//! reserved, an eviction of it stays clean; what remains is that a reuse of
//! that mapping, if it is not evicted first, hands the program an
//! unreadable one (a fault at its first read, not wrong data): the answer
//! is one bool, so the queue cannot be told which run failed.

/// Drops the resident pages of `[addr, addr + len)`, a run of queued
/// mappings munmapq alone owns, keeping the mappings `PROT_READ`.
pub fn drop_pages(addr: usize, len: usize) -> bool {
    // SAFETY: a range of queued mappings munmapq owns alone: nobody reads
    // it while it is inaccessible. The real mprotect (not the hook).
    if unsafe { super::real::mprotect(addr as *mut _, len, libc::PROT_NONE) } != 0 {
        return false;
    }
    // SAFETY: as above; back to the protection it was mapped with.
    if unsafe { super::real::mprotect(addr as *mut _, len, libc::PROT_READ) } == 0 {
        return true;
    }
    // SAFETY: the same range and protection through the Mach call (the real
    // one, not the hook), this task's own map.
    let kr = unsafe {
        super::real::mach_vm_protect(
            super::real::task_self(),
            addr as libc::mach_vm_address_t,
            len as libc::mach_vm_size_t,
            0,
            libc::VM_PROT_READ,
        )
    };
    // Restored: the pages were dropped all the same.
    kr == libc::KERN_SUCCESS
}
