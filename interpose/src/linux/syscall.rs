//! libc's `syscall`: a program can make through it any call munmapq hooks
//! by name, and the kernel would meet a queued range as if munmapq were
//! not there (a raw `mremap` moving a page into a queued range that a
//! flush then unmaps; a raw `unlink` of a file whose space a queued mapping
//! keeps). So each of those numbers is routed through its hook; the close
//! numbers through the close hooks (`lastclose.rs`); a seccomp
//! filter stops munmapq first (`sandbox.rs`); a fork or a clone that
//! copies this memory unmaps the queue first (`children.rs`). Any other number goes
//! straight on: `syscall` is common (Rust's futexes, for one), so this is a
//! look at the number.
//!
//! What a preload library cannot see at all: the `syscall` instruction
//! itself (a program or runtime that makes system calls without libc, as
//! Go does), and io_uring's operations (`IORING_OP_MADVISE`,
//! `IORING_OP_UNLINKAT`, `IORING_OP_RENAMEAT`, ...).

use super::children::{copies_memory, copy_coming, copy_made};
use super::context;
use super::hooks as own;
use super::lastclose as names;
use super::policy::{changing, changing_everything, policy_span};
use super::real;
#[cfg(target_arch = "x86_64")]
use super::sandbox::maps_vdso;
use super::sandbox::{installs_seccomp, names_a_range, replaces_exe_file, seccomp_coming};
use super::signatures::{args, ret};
use crate::hooks::{self as shared, on_advised_range, on_range, protecting};
use libc::{c_char, c_int, c_long, c_uint, c_ulong, c_void, off_t, size_t};
use munmapq_core::engine::Effect;

/// # Safety
/// As for C `syscall` (variadic in C: on x86_64 and aarch64 the variadic
/// integer arguments travel where fixed ones would, so six are received;
/// those the caller did not pass are never used by the kernel, nor here:
/// each route reads only the arguments its call has).
pub unsafe fn syscall(
    args::syscall {
        nr,
        a1,
        a2,
        a3,
        a4,
        a5,
        a6,
    }: args::syscall,
) -> ret::syscall {
    if installs_seccomp(nr, a1) {
        seccomp_coming();
    }
    // SAFETY: the caller's own arguments, as the kernel would take them.
    let raw = || unsafe { real::syscall(nr, a1, a2, a3, a4, a5, a6) };
    if copies_memory(nr, a1) {
        copy_coming();
        // A child on this stack (a fork, a clone without a stack of its
        // own: the second word) comes back here; with this thread's
        // thread-local storage unless the clone gives it its own.
        let own_tls = a1 & libc::CLONE_SETTLS as c_long != 0;
        if nr != libc::SYS_clone || (a2 == 0 && !own_tls) {
            let r = raw();
            if r == 0 {
                copy_made();
            }
            return r;
        }
    }
    // SAFETY: each hook gets the arguments its system call takes, as the
    // C wrapper of that call would pass them.
    if let Some(r) = unsafe { routed(nr, [a1, a2, a3, a4, a5, a6], raw) } {
        return r;
    }
    names::around_syscall(nr, a1, a2, a3, raw)
}

/// `map_shadow_stack(addr, size, flags)` (Linux 6.6+; the same number on
/// x86_64 and arm64; the libc crate does not name it).
const SYS_MAP_SHADOW_STACK: c_long = 453;

/// The hook that serves system call `nr`, if munmapq has one, called with
/// its arguments; None for any other number.
///
/// # Safety
/// `a` are the arguments of system call `nr` (what the kernel validates,
/// the hooks pass on to it, pointers included).
unsafe fn routed(nr: c_long, a: [c_long; 6], raw: impl Fn() -> c_long) -> Option<c_long> {
    let p = |i: usize| a[i] as *mut c_void;
    let n = |i: usize| a[i] as size_t;
    let i = |i: usize| a[i] as c_int;
    let s = |i: usize| a[i] as *const c_char;
    // SAFETY: for every arm, forwarded from our caller's contract; each
    // hook makes its real call with these arguments, as its C function.
    let r = unsafe {
        match nr {
            // With MAP_SHARED_VALIDATE the kernel refuses a flag it does not
            // know (none is past bit 31), which the C function, taking
            // `int`, would drop. It refuses it after the checks every mmap
            // meets (the count of mappings, the place, MAP_FIXED_NOREPLACE),
            // so those are met as by a mmap at that place: what is queued
            // there released first, ENOMEM retried after a flush. It maps
            // nothing, so its answer is -1.
            libc::SYS_mmap
                if a[3] as c_int & libc::MAP_TYPE == libc::MAP_SHARED_VALIDATE
                    && a[3] != i(3) as c_long =>
            {
                on_range(p(0), n(1), Effect::Modify, || raw() as c_int) as c_long
            }
            libc::SYS_mmap => {
                let off = a[5] as off_t;
                let (addr, len, prot, flags, fd) = (p(0), n(1), i(2), i(3), i(4));
                shared::mmap(args::mmap {
                    addr,
                    len,
                    prot,
                    flags,
                    fd,
                    off,
                }) as c_long
            }
            libc::SYS_munmap => shared::munmap(args::munmap {
                addr: p(0),
                len: n(1),
            }) as c_long,
            // The calls on one range: their hook's work around the raw call,
            // which the kernel gets as the program made it (the C
            // functions take some of these words as `int`, and `msync` is
            // a cancellation point where `syscall` is not).
            libc::SYS_mprotect => {
                let effect = protecting(a[2] == libc::PROT_READ as c_long);
                on_range(p(0), n(1), effect, || raw() as c_int) as c_long
            }
            libc::SYS_pkey_mprotect => {
                let effect = protecting(a[2] == libc::PROT_READ as c_long && i(3) == -1);
                on_range(p(0), n(1), effect, || raw() as c_int) as c_long
            }
            libc::SYS_madvise => on_advised_range(p(0), n(1), || raw() as c_int) as c_long,
            libc::SYS_mlock
            | libc::SYS_mlock2
            | libc::SYS_mseal
            | libc::SYS_mincore
            | libc::SYS_msync
            | libc::SYS_munlock => {
                let effect = match nr {
                    libc::SYS_mincore | libc::SYS_msync | libc::SYS_munlock => Effect::Inspect,
                    _ => Effect::Change,
                };
                on_range(p(0), n(1), effect, || raw() as c_int) as c_long
            }
            libc::SYS_prctl if replaces_exe_file(a[0], a[1]) => changing_everything(raw),
            #[cfg(target_arch = "x86_64")]
            libc::SYS_arch_prctl if maps_vdso(a[0]) => changing_everything(raw),
            libc::SYS_prctl if names_a_range(a[0], a[1]) => {
                on_range(p(2), n(3), Effect::Inspect, || raw() as c_int) as c_long
            }
            libc::SYS_mlockall => shared::mlockall(args::mlockall { flags: i(0) }) as c_long,
            libc::SYS_munlockall => shared::munlockall(args::munlockall {}) as c_long,
            libc::SYS_shmat => own::shmat(args::shmat {
                id: i(0),
                addr: p(1),
                flags: i(2),
            }) as c_long,
            // The raw call: without MREMAP_FIXED the kernel may still take
            // the fifth word as a hint (MREMAP_DONTUNMAP), where glibc's
            // mremap passes NULL.
            libc::SYS_mremap => {
                own::mremap_with(p(0), n(1), n(2), i(3), p(4), || raw() as *mut c_void) as c_long
            }
            libc::SYS_mbind | libc::SYS_set_mempolicy_home_node => {
                changing(&[policy_span(a[0] as usize, n(1))], raw)
            }
            libc::SYS_process_madvise => changing_everything(raw),
            // A shadow stack asked for at an address is mapped there as
            // MAP_FIXED_NOREPLACE maps (`alloc_shstk`): what is queued in
            // its range is released first, so that it finds the room free.
            SYS_MAP_SHADOW_STACK if a[0] != 0 => {
                on_range(p(0), n(1), Effect::Inspect, || raw() as c_int) as c_long
            }
            #[cfg(target_arch = "x86_64")]
            libc::SYS_unlink => names::unlink(args::unlink { path: s(0) }) as c_long,
            libc::SYS_unlinkat => {
                let (dir, path, flags) = (i(0), s(1), i(2));
                names::unlinkat(args::unlinkat { dir, path, flags }) as c_long
            }
            #[cfg(target_arch = "x86_64")]
            libc::SYS_rename => names::rename(args::rename {
                old: s(0),
                new: s(1),
            }) as c_long,
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            libc::SYS_renameat => {
                let (old_dir, old, new_dir, new) = (i(0), s(1), i(2), s(3));
                names::renameat(args::renameat {
                    old_dir,
                    old,
                    new_dir,
                    new,
                }) as c_long
            }
            libc::SYS_renameat2 => {
                let (old_dir, old, new_dir, new, flags) = (i(0), s(1), i(2), s(3), a[4] as c_uint);
                names::renameat2(args::renameat2 {
                    old_dir,
                    old,
                    new_dir,
                    new,
                    flags,
                }) as c_long
            }
            libc::SYS_umount2 => names::umount2(args::umount2 {
                target: s(0),
                flags: i(1),
            }) as c_long,
            libc::SYS_mount => {
                let (src, target, fstype, data) = (s(0), s(1), s(2), p(4));
                let flags = a[3] as c_ulong;
                context::mount(args::mount {
                    src,
                    target,
                    fstype,
                    flags,
                    data,
                }) as c_long
            }
            libc::SYS_mount_setattr => {
                let (dir, path, flags, attr, size) = (i(0), s(1), a[2] as c_uint, p(3), n(4));
                context::mount_setattr(args::mount_setattr {
                    dir,
                    path,
                    flags,
                    attr,
                    size,
                }) as c_long
            }
            // The kernel answers the old persona as an `unsigned int`, which
            // the C function answers as an `int` (-1: refused, by a
            // seccomp filter, as no persona is 0xffffffff).
            libc::SYS_personality => match context::personality(args::personality {
                persona: a[0] as c_ulong,
            }) {
                -1 => -1,
                old => old as c_uint as c_long,
            },
            _ => return None,
        }
    };
    Some(r)
}
