//! Raw system calls, made with the instruction itself rather than through
//! libc's `syscall`: the library exports its own `syscall` (to see a
//! program install a seccomp filter), so a call to libc's name from in
//! here would come back to that hook, and before the constructor has
//! resolved the real one there is nothing else to call.

use libc::{c_int, c_long};

/// The system call `nr` with up to six arguments (missing ones are 0):
/// the kernel's answer, `-errno` on failure.
#[cfg(target_arch = "x86_64")]
#[inline]
pub unsafe fn raw(nr: c_long, args: [c_long; 6]) -> c_long {
    let ret: c_long;
    // SAFETY: the x86_64 Linux system call convention (number in rax,
    // arguments in rdi, rsi, rdx, r10, r8, r9; rcx and r11 clobbered); the
    // caller vouches for what the call itself does to memory.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr => ret,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            in("r9") args[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// As on x86_64: number in x8, arguments in x0-x5, answer in x0.
#[cfg(target_arch = "aarch64")]
#[inline]
pub unsafe fn raw(nr: c_long, args: [c_long; 6]) -> c_long {
    let ret: c_long;
    // SAFETY: the aarch64 Linux system call convention; the caller vouches
    // for what the call itself does to memory.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") nr,
            inlateout("x0") args[0] => ret,
            in("x1") args[1],
            in("x2") args[2],
            in("x3") args[3],
            in("x4") args[4],
            in("x5") args[5],
            options(nostack),
        );
    }
    ret
}

/// Other targets: libc's `syscall`, which after the constructor has run
/// reaches the real one through the hook (before it, a `syscall` call
/// from the library would recurse: munmapq is built and tested for x86_64
/// and aarch64).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub unsafe fn raw(nr: c_long, a: [c_long; 6]) -> c_long {
    // SAFETY: forwarded from our caller's contract.
    match unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) } {
        -1 => -(crate::errno::get() as c_long),
        r => r,
    }
}

/// `raw` with `args` padded to six.
#[inline]
pub unsafe fn call(nr: c_long, args: &[c_long]) -> c_long {
    let mut all = [0; 6];
    all[..args.len()].copy_from_slice(args);
    // SAFETY: forwarded from our caller's contract.
    unsafe { raw(nr, all) }
}

/// As libc's `syscall`: -1 and errno on failure.
#[inline]
pub unsafe fn call_errno(nr: c_long, args: &[c_long]) -> c_long {
    // SAFETY: forwarded from our caller's contract.
    let r = unsafe { call(nr, args) };
    if (-4095..0).contains(&r) {
        crate::errno::set(-r as i32);
        return -1;
    }
    r
}

/// The one signal left deliverable: a `SIGTRAP` the kernel raises at an
/// instruction of the thread itself (the trap flag's step of a program
/// that steps itself) is not held while blocked but kills the process,
/// where the program's handler would have run. The other signals raised so
/// (`SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE`) would come from a fault of the
/// library's own code, and `SIGSYS` from a seccomp filter, under which the
/// library makes no call of its own: blocked, one sent by `kill` waits, as
/// it must, where a handler could jump out of the read.
const STEP: c_int = libc::SIGTRAP;

/// Blocks every signal but [`STEP`] until dropped (raw `rt_sigprocmask`,
/// so glibc's own signals too): no handler, and so no `siglongjmp` from
/// one, can run between an `open` and its `close`, but that of a program
/// stepping itself.
pub struct SignalsBlocked {
    /// The mask before, if blocking succeeded (else nothing is restored:
    /// the program's own mask must never be replaced by a guess).
    old: Option<u64>,
}

impl SignalsBlocked {
    #[inline]
    pub fn new() -> Self {
        let all = !(1u64 << (STEP - 1));
        let mut old: u64 = 0;
        // SAFETY: valid 8-byte masks (the kernel's sigset size on Linux).
        let r = unsafe {
            call(
                libc::SYS_rt_sigprocmask,
                &[
                    libc::SIG_BLOCK as c_long,
                    &all as *const u64 as c_long,
                    &mut old as *mut u64 as c_long,
                    8,
                ],
            )
        };
        SignalsBlocked {
            old: (r == 0).then_some(old),
        }
    }
}

impl Drop for SignalsBlocked {
    #[inline]
    fn drop(&mut self) {
        let Some(old) = self.old else { return };
        // SAFETY: puts back the mask `new` read.
        unsafe {
            call(
                libc::SYS_rt_sigprocmask,
                &[
                    libc::SIG_SETMASK as c_long,
                    &old as *const u64 as c_long,
                    0,
                    8,
                ],
            )
        };
    }
}

/// `prctl(PR_GET_SECCOMP)`: 0 without seccomp, 2 under a filter (an
/// error from the filter itself counts as a filter; EINVAL is a kernel
/// built without seccomp).
pub fn seccomp_mode() -> c_long {
    // SAFETY: PR_GET_SECCOMP takes no pointer.
    match unsafe { call(libc::SYS_prctl, &[libc::PR_GET_SECCOMP as c_long]) } {
        r if r == -(libc::EINVAL as c_long) => 0,
        r if r < 0 => 2,
        r => r,
    }
}

/// The type and block size of the file system of `fd`'s file (`fstatfs`).
pub fn file_system(fd: i32) -> Option<(i64, usize)> {
    // SAFETY: `statfs` is plain data; fstatfs writes it or fails.
    let mut sf: libc::statfs = unsafe { core::mem::zeroed() };
    // SAFETY: a valid out-pointer; a bad fd only makes the call fail (the
    // system call glibc's fstatfs makes).
    if unsafe {
        call(
            libc::SYS_fstatfs,
            &[fd as c_long, &mut sf as *mut libc::statfs as c_long],
        )
    } != 0
    {
        return None;
    }
    // The types of `f_type` and `f_bsize` differ between targets.
    #[allow(clippy::unnecessary_cast)]
    Some((sf.f_type as i64, sf.f_bsize as usize))
}
