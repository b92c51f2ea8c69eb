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
//! All answer a `kern_return_t` and leave errno alone; so do the Mach
//! calls that set a range's inheritance or paging behaviour (below).

use super::os::{RawOs, RealOs};
use super::real;
use super::signatures::{args, ret};
use crate::{errno, ENGINE};
use libc::{c_char, c_int, kern_return_t, vm_map_t};
use munmapq_core::engine::Effect;
use munmapq_core::os::Errno;

/// Releases what munmapq holds in the range (queued mappings are unmapped,
/// live ones stop being tracked), then makes the call, which has `effect`
/// there; only for this task's own map (another task's ranges are not
/// ours).
fn on_own_range(
    task: vm_map_t,
    address: u64,
    size: u64,
    effect: Effect,
    call: impl FnOnce() -> kern_return_t,
) -> kern_return_t {
    if task != real::task_self() {
        return call();
    }
    let saved = errno::get();
    let range = usize::try_from(address)
        .ok()
        .zip(usize::try_from(size).ok())
        .and_then(|(a, l)| ENGINE.span(a, l, effect));
    let mut call = Some(call);
    let r = ENGINE.range_call(&RealOs, &[range], || {
        Ok::<_, Errno>(call.take().map_or(libc::KERN_FAILURE, |c| c()))
    });
    errno::set(saved);
    r.unwrap_or(libc::KERN_FAILURE)
}

/// # Safety
/// As for Mach's `vm_deallocate`.
pub unsafe fn vm_deallocate(
    args::vm_deallocate {
        task,
        address,
        size,
    }: args::vm_deallocate,
) -> ret::vm_deallocate {
    // SAFETY: the caller's own arguments.
    on_own_range(
        task,
        address as u64,
        size as u64,
        Effect::Modify,
        || unsafe { real::vm_deallocate(task, address, size) },
    )
}

/// # Safety
/// As for Mach's `mach_vm_deallocate`.
pub unsafe fn mach_vm_deallocate(
    args::mach_vm_deallocate {
        task,
        address,
        size,
    }: args::mach_vm_deallocate,
) -> ret::mach_vm_deallocate {
    // SAFETY: the caller's own arguments.
    on_own_range(task, address, size, Effect::Modify, || unsafe {
        real::mach_vm_deallocate(task, address, size)
    })
}

/// # Safety
/// As for Mach's `vm_protect`.
pub unsafe fn vm_protect(
    args::vm_protect {
        task,
        address,
        size,
        set_maximum,
        new_protection,
    }: args::vm_protect,
) -> ret::vm_protect {
    // SAFETY: the caller's own arguments.
    on_own_range(
        task,
        address as u64,
        size as u64,
        Effect::Change,
        || unsafe { real::vm_protect(task, address, size, set_maximum, new_protection) },
    )
}

/// # Safety
/// As for Mach's `mach_vm_protect`.
pub unsafe fn mach_vm_protect(
    args::mach_vm_protect {
        task,
        address,
        size,
        set_maximum,
        new_protection,
    }: args::mach_vm_protect,
) -> ret::mach_vm_protect {
    // SAFETY: the caller's own arguments.
    on_own_range(task, address, size, Effect::Change, || unsafe {
        real::mach_vm_protect(task, address, size, set_maximum, new_protection)
    })
}

// What a fork child inherits of a range, and how the range is paged.
//
// `minherit` (xnu `bsd/kern/kern_mman.c` `minherit`, to
// `mach_vm_inherit`) and `vm_inherit`/`mach_vm_inherit` set an entry's
// inheritance; a mapping reused from the queue would keep the
// `VM_INHERIT_NONE` the program gave the range it unmapped, where a fresh
// mmap gets `VM_INHERIT_DEFAULT`, a copy (`kern_mman.c` `mmap`), and a fork
// child reading it would fault. `vm_behavior_set`/`mach_vm_behavior_set` set
// its paging behaviour (`osfmk/vm/vm_map.c` `vm_map_behavior_set`:
// sequential, random, and the advice `madvise` gives), which a fresh
// mapping would not have either. So each is a range call like `madvise`:
// what is queued in the range is unmapped first, and a live mapping there
// is no longer tracked (never reused). None is a cancellation point.

/// # Safety
/// As for C `minherit`.
pub unsafe fn minherit(args::minherit { addr, len, inherit }: args::minherit) -> ret::minherit {
    // SAFETY: the caller's own arguments.
    crate::hooks::on_range(addr, len, Effect::Change, || unsafe {
        real::minherit(addr, len, inherit)
    })
}

/// # Safety
/// As for Mach's `vm_inherit`.
pub unsafe fn vm_inherit(
    args::vm_inherit {
        task,
        address,
        size,
        new_inheritance,
    }: args::vm_inherit,
) -> ret::vm_inherit {
    // SAFETY: the caller's own arguments.
    on_own_range(
        task,
        address as u64,
        size as u64,
        Effect::Change,
        || unsafe { real::vm_inherit(task, address, size, new_inheritance) },
    )
}

/// # Safety
/// As for Mach's `mach_vm_inherit`.
pub unsafe fn mach_vm_inherit(
    args::mach_vm_inherit {
        task,
        address,
        size,
        new_inheritance,
    }: args::mach_vm_inherit,
) -> ret::mach_vm_inherit {
    // SAFETY: the caller's own arguments.
    on_own_range(task, address, size, Effect::Change, || unsafe {
        real::mach_vm_inherit(task, address, size, new_inheritance)
    })
}

/// # Safety
/// As for Mach's `vm_behavior_set`.
pub unsafe fn vm_behavior_set(
    args::vm_behavior_set {
        task,
        address,
        size,
        new_behavior,
    }: args::vm_behavior_set,
) -> ret::vm_behavior_set {
    // SAFETY: the caller's own arguments.
    on_own_range(
        task,
        address as u64,
        size as u64,
        Effect::Change,
        || unsafe { real::vm_behavior_set(task, address, size, new_behavior) },
    )
}

/// # Safety
/// As for Mach's `mach_vm_behavior_set`.
pub unsafe fn mach_vm_behavior_set(
    args::mach_vm_behavior_set {
        task,
        address,
        size,
        new_behavior,
    }: args::mach_vm_behavior_set,
) -> ret::mach_vm_behavior_set {
    // SAFETY: the caller's own arguments.
    on_own_range(task, address, size, Effect::Change, || unsafe {
        real::mach_vm_behavior_set(task, address, size, new_behavior)
    })
}

/// # Safety
/// As for C `vfork`, which on macOS is a fork that runs libSystem's own
/// fork handlers but not those registered with `pthread_atfork` (Libc
/// `sys/fork.c`: `vfork` calls `_do_fork(true)`, which passes
/// `LIBSYSTEM_ATFORK_HANDLERS_ONLY_FLAG`; Libsystem `init.c`
/// `libSystem_atfork_prepare` and `_parent` then skip
/// `_pthread_atfork_*_handlers`, and `libSystem_atfork_child` runs only
/// libSystem's). The library's handlers are run here around it, so that a
/// vfork child gets the table whole and releases what its parent had
/// queued, as a fork child does (the child is a process of its own, with
/// its own copy of this stack: the call returns once in each). errno as
/// the call left it.
pub unsafe fn vfork(args::vfork {}: args::vfork) -> ret::vfork {
    crate::init::before_fork();
    // SAFETY: no arguments; a fork on macOS.
    let pid = unsafe { real::vfork() };
    let saved = errno::get();
    if pid == 0 {
        crate::init::after_fork_in_child();
    } else {
        crate::init::after_fork_in_parent();
    }
    errno::set(saved);
    pid
}

// The raw stubs and `msync$NOCANCEL`.
//
// libSystem's `mmap` and `munmap` are C wrappers around the exported raw
// stubs `__mmap` and `__munmap` (xnu `libsyscall/wrappers/unix03/mmap.c`:
// `mmap` rejects a zero length or neither MAP_PRIVATE nor MAP_SHARED with
// EINVAL, adds `MAP_UNIX03` and calls `__mmap`; `munmap.c`: `munmap` calls
// `__munmap` after the stack logger). A program (compiler-rt's sanitizer
// runtime declares and calls `__mmap`/`__munmap`) that binds the stubs
// would map and unmap unseen; their hooks decide as `mmap` and `munmap` do
// and pass through to the stubs themselves (`RawOs`), so such a caller
// keeps the raw semantics.
//
// No call goes through two hooks. dyld rebinds only what an image binds
// (dyld `Loader.cpp` `Loader::interpose` is applied to each bind target, and
// `applyInterposingToDyldCache` patches the shared cache's *patchable uses*
// of an export, `doc/PatchTable.md`); a call inside libsystem_kernel from
// `mmap` to `__mmap` is a direct branch in the same image, which neither
// touches (`doc/man/man1/ld.1`, `-interposable_list`: without it "calls to
// malloc from within libSystem ... would be direct calls", and
// `libsyscall/Libsyscall.xcconfig` links without it). So the program's `mmap`
// reaches the `mmap` hook, whose real `mmap` (this image is not rebound:
// `appendInterposingTuples` adds a tuple specific to the interposing image
// that maps the replacee to itself) calls `__mmap` directly, never the
// `__mmap` hook. The same holds for `munmap` and `__munmap`.
//
// `msync$NOCANCEL` is the system call 405, its own stub (`syscall.map`
// aliases it to `___msync_nocancel`, not to `_msync`), so it needs its own
// pair; every other alias of an interposed original (`___mprotect`,
// `___msync`, `_posix_madvise`) is one address with it, which dyld matches
// (`appendInterposingTuples` compares resolved addresses), so binds to
// those names reach the hooks already.

/// # Safety
/// As for libSystem's `__mmap` (the raw system call).
pub unsafe fn __mmap(
    args::__mmap {
        addr,
        len,
        prot,
        flags,
        fd,
        off,
    }: args::__mmap,
) -> ret::__mmap {
    let call = munmapq_core::os::Mmap::new(addr as usize, len, prot, flags, fd, off);
    // SAFETY: the caller's own arguments.
    crate::hooks::mmap_through(&RawOs, call, |c| unsafe {
        super::real::__mmap(
            c.addr as *mut libc::c_void,
            c.len,
            c.prot,
            c.flags,
            c.fd,
            c.off,
        )
    })
}

/// # Safety
/// As for libSystem's `__munmap` (the raw system call).
pub unsafe fn __munmap(args::__munmap { addr, len }: args::__munmap) -> ret::__munmap {
    // SAFETY: the caller's own arguments.
    crate::hooks::munmap_through(&RawOs, addr, len, |a, l| unsafe {
        super::real::__munmap(a, l)
    })
}

/// # Safety
/// As for `msync$NOCANCEL`.
pub unsafe fn msync_nocancel(
    args::msync_nocancel { addr, len, flags }: args::msync_nocancel,
) -> ret::msync_nocancel {
    // As the `msync` hook, without the cancellation point.
    // SAFETY: the caller's own arguments.
    crate::hooks::on_range(addr, len, Effect::Inspect, || unsafe {
        real::msync_nocancel(addr, len, flags)
    })
}

// The end of a file's name or of a volume.
//
// On macOS a file mapping keeps no open file: `mmap` drops its file
// reference before it returns (xnu `bsd/kern/kern_mman.c` `mmap`:
// `vnode_put`, `fp_drop`) and keeps a use count on the vnode instead
// (`bsd/kern/ubc_subr.c` `ubc_map` takes `vnode_ref_ext`, which
// `ubc_unmap` gives back once the file's last mapping goes). So the
// effects of a last close (flock and OFD-style locks, released by
// `vn_closefile` from the file's last `fg_drop`; POSIX locks; close
// events) are not the queue's to delay, and there is no close hook. What a
// queued mapping does delay is what waits for the use count:
// - an unlinked file's space, freed at `VNOP_INACTIVE` when the use count
//   reaches 0 (`bsd/vfs/vfs_subr.c` `vnode_rele_internal`);
// - an unmount without `MNT_FORCE`, which fails with EBUSY while any vnode
//   of the volume has a use count (`vflush` in `bsd/vfs/vfs_subr.c`,
//   called by `dounmount`).
// So before the calls that end a name (`unlink`, `unlinkat`, `rename`,
// `renameat`, `renamex_np`, `renameatx_np` over an existing file, and the
// Carbon-era `__carbon_delete`) what is queued of that file is unmapped,
// and before `unmount` everything queued (the engine's entry points, as
// Linux's hooks call them). libSystem's `remove` calls `unlink` across
// images (Libc `stdio/FreeBSD/remove.c`), which dyld rebinds to the hook;
// `renamex_np` calls `renameatx_np` inside libsystem_kernel
// (`libsyscall/wrappers/renamex.c`), which it does not, hence both hooks.
// None of these is a cancellation point (no `__pthread_testcancel` in
// their system calls, `bsd/vfs/vfs_syscalls.c`), nor is the `fstatat`
// the hook makes.

/// Releases what munmapq holds of the file `path` names (relative to
/// `dir`, not following a last symlink), when anything is tracked; errno
/// as the caller left it.
fn losing_name(dir: c_int, path: *const c_char) {
    if path.is_null() || !ENGINE.tracks_any() {
        return;
    }
    let saved = errno::get();
    // SAFETY: plain data; the kernel writes it or fails.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: the caller's NUL-terminated path and a valid out-pointer
    // (`fstatat$INODE64` on x86_64, the 64-bit-inode `stat`, as libc
    // declares it).
    if unsafe { libc::fstatat(dir, path, &mut st, libc::AT_SYMLINK_NOFOLLOW) } == 0 {
        ENGINE.unlinking(&RealOs, st.st_dev as u64, st.st_ino);
    }
    errno::set(saved);
}

/// The result of an unlink, rename or unmount, after one more try at the
/// table if the call had to record itself (it found the table busy), as
/// Linux's hooks do (`Engine::name_call_done`): the record is applied now
/// if the holder is done, else by the next holder. errno as the call set it.
fn after_name_call(r: c_int) -> c_int {
    let saved = errno::get();
    ENGINE.name_call_done(&RealOs);
    errno::set(saved);
    r
}

/// # Safety
/// As for C `unlink`.
pub unsafe fn unlink(args::unlink { path }: args::unlink) -> ret::unlink {
    losing_name(libc::AT_FDCWD, path);
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::unlink(path) })
}

/// # Safety
/// As for C `unlinkat`.
pub unsafe fn unlinkat(args::unlinkat { dir, path, flags }: args::unlinkat) -> ret::unlinkat {
    losing_name(dir, path);
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::unlinkat(dir, path, flags) })
}

/// # Safety
/// As for C `rename`: the file at `new`, if any, loses that name.
pub unsafe fn rename(args::rename { old, new }: args::rename) -> ret::rename {
    losing_name(libc::AT_FDCWD, new);
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::rename(old, new) })
}

/// # Safety
/// As for C `renameat`.
pub unsafe fn renameat(
    args::renameat {
        old_dir,
        old,
        new_dir,
        new,
    }: args::renameat,
) -> ret::renameat {
    losing_name(new_dir, new);
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::renameat(old_dir, old, new_dir, new) })
}

/// # Safety
/// As for `renamex_np` (with `RENAME_SWAP` both files keep a name:
/// releasing the one at `new` only costs its reuse; with `RENAME_EXCL`
/// there is none).
pub unsafe fn renamex_np(
    args::renamex_np { old, new, flags }: args::renamex_np,
) -> ret::renamex_np {
    losing_name(libc::AT_FDCWD, new);
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::renamex_np(old, new, flags) })
}

/// # Safety
/// As for `renameatx_np`.
pub unsafe fn renameatx_np(
    args::renameatx_np {
        old_dir,
        old,
        new_dir,
        new,
        flags,
    }: args::renameatx_np,
) -> ret::renameatx_np {
    losing_name(new_dir, new);
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::renameatx_np(old_dir, old, new_dir, new, flags) })
}

/// # Safety
/// As for `unmount`: every queued mapping is unmapped first, so that none
/// keeps a vnode of the volume in use (with `MNT_FORCE` too: a forced
/// unmount would leave them mapped to a dead vnode); a busy table is
/// waited for a bounded while (`Engine::unmounting`), since xnu's
/// `dounmount` fails with EBUSY while `vflush` finds a vnode in use.
pub unsafe fn unmount(args::unmount { target, flags }: args::unmount) -> ret::unmount {
    let saved = errno::get();
    ENGINE.unmounting(&RealOs);
    errno::set(saved);
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::unmount(target, flags) })
}

/// # Safety
/// As for libSystem's `__carbon_delete` (Carbon's `delete`).
pub unsafe fn __carbon_delete(
    args::__carbon_delete { path }: args::__carbon_delete,
) -> ret::__carbon_delete {
    losing_name(libc::AT_FDCWD, path);
    // SAFETY: the caller's own arguments.
    after_name_call(unsafe { real::__carbon_delete(path) })
}
