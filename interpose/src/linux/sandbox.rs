//! Linux hooks for what a program sets up around itself: a seccomp filter
//! (`prctl(PR_SET_SECCOMP)`, or the `seccomp` system call through libc's
//! `syscall`) and `RLIMIT_AS` (`setrlimit`, `prlimit` and their 64-bit
//! names). Each is rare. libc's `syscall` asks `installs_seccomp` first
//! (`syscall.rs`). `prctl` also names ranges of anonymous mappings and
//! replaces the process's executable file.

use super::os::RealOs;
use super::policy::changing_everything;
use super::real::{self, prlimit_raw};
use super::signatures::{args, ret};
use crate::hooks::on_range;
use crate::ENGINE;
use libc::{c_int, c_long, c_void, rlimit, size_t};
use munmapq_core::engine::Effect;

/// A seccomp filter (or strict mode) can kill the process on any system
/// call munmapq makes: before it is installed, the queue is unmapped and
/// munmapq passes everything through from then on, even if the call
/// fails (that costs only the queue), and the exit report is not written
/// (it would open a file and ask the pid).
pub(super) fn seccomp_coming() {
    let saved = crate::errno::get();
    crate::init::sandboxed();
    ENGINE.stop_for_good(&RealOs);
    crate::errno::set(saved);
}

/// Whether `syscall(nr, a1, ...)` installs a seccomp filter or mode.
/// The kernel reads `seccomp`'s operation as `unsigned int`, `prctl`'s
/// option and `PR_SET_MM`'s and `PR_SET_VMA`'s sub-options as `int`, and
/// `arch_prctl`'s option as `int`: the bits above are not looked at
/// (`kernel/seccomp.c`, `kernel/sys.c`, `arch/x86/kernel/process_64.c`).
fn as_int(word: c_long) -> c_long {
    word as c_int as c_long
}

pub(super) fn installs_seccomp(nr: c_long, a1: c_long) -> bool {
    let op = a1 as libc::c_uint as c_long;
    (nr == libc::SYS_seccomp
        && (op == libc::SECCOMP_SET_MODE_STRICT as c_long
            || op == libc::SECCOMP_SET_MODE_FILTER as c_long))
        || (nr == libc::SYS_prctl && as_int(a1) == libc::PR_SET_SECCOMP as c_long)
}

/// # Safety
/// As for C `prctl` (variadic in C, read as `syscall` is).
pub unsafe fn prctl(
    args::prctl {
        option,
        a2,
        a3,
        a4,
        a5,
    }: args::prctl,
) -> ret::prctl {
    if option == libc::PR_SET_SECCOMP {
        seccomp_coming();
    }
    if replaces_exe_file(option as c_long, a2 as c_long) {
        // SAFETY: the caller's own arguments.
        let call = || unsafe { real::prctl(option, a2, a3, a4, a5) } as c_long;
        return changing_everything(call) as c_int;
    }
    if names_a_range(option as c_long, a2 as c_long) {
        // SAFETY: the caller's own arguments.
        let call = || unsafe { real::prctl(option, a2, a3, a4, a5) };
        return on_range(a3 as *const c_void, a4 as size_t, Effect::Inspect, call);
    }
    // SAFETY: the caller's own arguments.
    unsafe { real::prctl(option, a2, a3, a4, a5) }
}

/// Whether `prctl(option, a2, ...)` names the anonymous mappings of a range
/// (`PR_SET_VMA_ANON_NAME`): the kernel walks the range and refuses a file
/// mapping in it (EBADF) where a hole is ENOMEM, so a queued range there
/// must be a hole again first (`mm/madvise.c`, `madvise_vma_anon_name`).
pub(super) fn names_a_range(option: c_long, a2: c_long) -> bool {
    as_int(option) == libc::PR_SET_VMA as c_long
        && as_int(a2) == libc::PR_SET_VMA_ANON_NAME as c_long
}

/// `prctl`'s options that replace the process's executable file
/// (`include/uapi/linux/prctl.h`; the libc crate does not name them).
const PR_SET_MM: c_long = 35;
const PR_SET_MM_EXE_FILE: c_long = 13;
const PR_SET_MM_MAP: c_long = 14;

/// Whether `prctl(option, a2, ...)` may replace the process's executable
/// file: the kernel refuses with EBUSY while any mapping of the old one is
/// left (`kernel/fork.c`, `replace_mm_exe_file`), and a window of it the
/// program unmapped must not be one. `PR_SET_MM_MAP` names the new file in
/// a structure behind the program's pointer (read by the kernel only, as
/// a bad pointer must get EFAULT from it; an `exe_fd` of -1 keeps the
/// file), so every such call counts. Both are a checkpoint's restore, rare:
/// the queue is unmapped first.
pub(super) fn replaces_exe_file(option: c_long, a2: c_long) -> bool {
    as_int(option) == PR_SET_MM && matches!(as_int(a2), PR_SET_MM_EXE_FILE | PR_SET_MM_MAP)
}

/// `arch_prctl`'s options that map the vDSO at an address (x86_64,
/// `arch/x86/include/uapi/asm/prctl.h`: `ARCH_MAP_VDSO_X32`, `_32`, `_64`):
/// the address is a hint to the kernel (`arch/x86/entry/vdso/vma.c`,
/// `map_vdso`), which a queued window there would turn away; the vDSO's
/// size is the kernel's, so the whole queue is unmapped first.
#[cfg(target_arch = "x86_64")]
pub(super) fn maps_vdso(option: c_long) -> bool {
    (0x2001..=0x2003).contains(&as_int(option))
}

/// This process's `RLIMIT_AS` as the kernel has it (None: cannot tell).
fn address_space_limits() -> Option<(u64, u64)> {
    // SAFETY: plain data.
    let mut now: rlimit = unsafe { core::mem::zeroed() };
    let r = prlimit_raw(0, libc::RLIMIT_AS as c_int, core::ptr::null(), &mut now);
    (r == 0).then_some((now.rlim_cur, now.rlim_max))
}

/// Runs `call`, which may set `resource` of process `pid`; when that was
/// this process's `RLIMIT_AS`, tells the engine, and whether it fell. The
/// limits are read from the kernel before and after, never through the
/// program's pointer (a bad one must get EFAULT from the kernel, not a
/// fault here). After the call, not before: the kernel never refuses a
/// limit below what is mapped, so nothing is lost, and nothing is flushed
/// for a call that fails. Whatever `pid` is: any thread's id names this
/// process (limits are the thread group's), and a call on another process
/// leaves this one's limits as they were.
fn around_limit(resource: c_int, call: impl FnOnce() -> c_int) -> c_int {
    if resource != libc::RLIMIT_AS as c_int || !ENGINE.active() {
        return call();
    }
    let before = address_space_limits();
    let r = call();
    if r == 0 {
        let saved = crate::errno::get();
        let after = address_space_limits();
        let lower = match (before, after) {
            (Some((cur, max)), Some((new_cur, new_max))) => new_cur < cur || new_max < max,
            _ => true,
        };
        ENGINE.address_space_limit_set(&RealOs, lower);
        crate::errno::set(saved);
    }
    r
}

/// # Safety
/// As for C `setrlimit`.
pub unsafe fn setrlimit(args::setrlimit { resource, rlim }: args::setrlimit) -> ret::setrlimit {
    // SAFETY: the caller's own arguments.
    around_limit(resource, || unsafe { real::setrlimit(resource, rlim) })
}

/// # Safety
/// As for C `setrlimit64` (the same structure on 64-bit targets).
pub unsafe fn setrlimit64(
    args::setrlimit64 { resource, rlim }: args::setrlimit64,
) -> ret::setrlimit64 {
    // SAFETY: the caller's own arguments.
    around_limit(resource, || unsafe { real::setrlimit64(resource, rlim) })
}

/// # Safety
/// As for C `prlimit`.
pub unsafe fn prlimit(
    args::prlimit {
        pid,
        resource,
        new,
        old,
    }: args::prlimit,
) -> ret::prlimit {
    // SAFETY: the caller's own arguments.
    around_limit(resource, || unsafe {
        real::prlimit(pid, resource, new, old)
    })
}

/// # Safety
/// As for C `prlimit64` (the same structure on 64-bit targets).
pub unsafe fn prlimit64(
    args::prlimit64 {
        pid,
        resource,
        new,
        old,
    }: args::prlimit64,
) -> ret::prlimit64 {
    // SAFETY: the caller's own arguments.
    around_limit(resource, || unsafe {
        real::prlimit64(pid, resource, new, old)
    })
}
