//! System calls Linux and macOS make the same way (POSIX), for their `Os`
//! implementations and start-up.

use munmapq_core::file::{FileFacts, FileStamp};
use munmapq_core::os::SignalStack;

/// The methods of `munmapq_core::os::Os` that both platforms implement the
/// same way, for their `impl Os for RealOs` (in a module beside the
/// platform's `real`): mmap and munmap through the real functions, the
/// `RLIMIT_AS` limit, the thread's name and its signal stack.
macro_rules! same_os_methods {
    () => {
        fn mmap(&self, m: munmapq_core::os::Mmap) -> Result<usize, munmapq_core::os::Errno> {
            // SAFETY: arguments the program passed to its own mmap call.
            let p = unsafe {
                super::real::mmap(
                    m.addr as *mut _,
                    m.len,
                    m.prot,
                    m.flags,
                    m.fd,
                    m.off as libc::off_t,
                )
            };
            crate::errno::addr_result(p)
        }

        fn munmap(&self, addr: usize, len: usize) -> Result<(), munmapq_core::os::Errno> {
            // SAFETY: either the program's own munmap arguments, or a range
            // munmapq mapped for the program and now owns alone.
            crate::errno::int_result(unsafe { super::real::munmap(addr as *mut _, len) }).map(drop)
        }

        fn address_space_limit(&self) -> Option<usize> {
            crate::posix::address_space_limit()
        }

        fn this_thread(&self) -> usize {
            crate::posix::this_thread()
        }

        fn signal_stack(&self) -> munmapq_core::os::SignalStack {
            crate::posix::signal_stack()
        }
    };
}
pub(crate) use same_os_methods;

/// Device, inode and stamp of `fd` if `fstat` says it is a regular file.
pub fn regular_file_facts(fd: i32) -> Option<FileFacts> {
    // SAFETY: `stat` is plain data; fstat writes it or fails.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: a valid out-pointer; a bad fd only makes the call fail.
    if unsafe { fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    Some(facts_of(&st))
}

/// What `fstat` said, as the engine keeps it.
// The stat fields' widths differ between targets.
#[allow(clippy::unnecessary_cast)]
fn facts_of(st: &libc::stat) -> FileFacts {
    FileFacts {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
        // fstat does not say (Linux asks statx first, see linux/file.rs).
        mnt: 0,
        nlink: st.st_nlink as u64,
        // Which name: asked by the caller where it matters (Linux).
        name: 0,
        stamp: FileStamp {
            size: st.st_size as i64,
            mtime_sec: st.st_mtime as i64,
            mtime_nsec: st.st_mtime_nsec as i64,
            ctime_sec: st.st_ctime as i64,
            ctime_nsec: st.st_ctime_nsec as i64,
        },
    }
}

// On Linux, the system calls glibc's `fstat`, `getrlimit` and `sigaltstack`
// make, without binding those names at load (each import costs every
// process a symbol lookup at start-up).

/// # Safety
/// `st` is valid for writing.
#[cfg(target_os = "linux")]
unsafe fn fstat(fd: i32, st: *mut libc::stat) -> i32 {
    let args = [
        fd as libc::c_long,
        c"".as_ptr() as libc::c_long,
        st as libc::c_long,
        libc::AT_EMPTY_PATH as libc::c_long,
    ];
    // SAFETY: forwarded from our caller's contract; the path is empty.
    unsafe { crate::platform::sys::call_errno(libc::SYS_newfstatat, &args) as i32 }
}
#[cfg(not(target_os = "linux"))]
use libc::fstat;

/// # Safety
/// `rl` is valid for writing.
#[cfg(target_os = "linux")]
unsafe fn getrlimit(resource: libc::__rlimit_resource_t, rl: *mut libc::rlimit) -> i32 {
    crate::platform::real::prlimit_raw(0, resource as i32, core::ptr::null(), rl)
}
#[cfg(not(target_os = "linux"))]
use libc::getrlimit;

/// # Safety
/// `old` is valid for writing; `new` is NULL or a valid stack.
#[cfg(target_os = "linux")]
unsafe fn sigaltstack(new: *const libc::stack_t, old: *mut libc::stack_t) -> i32 {
    let args = [new as libc::c_long, old as libc::c_long];
    // SAFETY: forwarded from our caller's contract.
    unsafe { crate::platform::sys::call_errno(libc::SYS_sigaltstack, &args) as i32 }
}
#[cfg(not(target_os = "linux"))]
use libc::sigaltstack;

/// The `RLIMIT_AS` soft limit, or `None` when unlimited.
pub fn address_space_limit() -> Option<usize> {
    // SAFETY: plain out-parameter.
    let mut rl: libc::rlimit = unsafe { core::mem::zeroed() };
    // SAFETY: valid out-pointer.
    if unsafe { getrlimit(libc::RLIMIT_AS, &mut rl) } != 0 || rl.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    Some(rl.rlim_cur as usize)
}

/// Whether `len` more bytes at the end of `fd` stay within `RLIMIT_FSIZE`:
/// past it a write raises SIGXFSZ, which would kill a program (`ulimit -f`)
/// for a line of ours. `fstat` is asked only when there is a limit.
pub fn fits_file_size_limit(fd: libc::c_int, len: usize) -> bool {
    // SAFETY: plain out-parameter.
    let mut rl: libc::rlimit = unsafe { core::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    if unsafe { getrlimit(libc::RLIMIT_FSIZE, &mut rl) } != 0 || rl.rlim_cur == libc::RLIM_INFINITY
    {
        return true;
    }
    // SAFETY: `stat` is plain data; fstat writes it or fails.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    if unsafe { fstat(fd, &mut st) } != 0 {
        return false;
    }
    st.st_mode & libc::S_IFMT != libc::S_IFREG
        || (st.st_size.max(0) as u64).saturating_add(len as u64) <= rl.rlim_cur as u64
}

/// The calling thread, as a number no other live thread has: on Linux its
/// thread pointer (what glibc's `pthread_self` answers on x86_64, and a
/// word of the thread's own control block on aarch64), read without
/// binding `pthread_self` at load.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub fn this_thread() -> usize {
    let tp: usize;
    // SAFETY: reads the word at %fs:0, the thread control block's pointer
    // to itself, which glibc sets for every thread before it runs.
    unsafe {
        core::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags))
    };
    tp
}

#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
pub fn this_thread() -> usize {
    let tp: usize;
    // SAFETY: reads the thread pointer register.
    unsafe {
        core::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem, preserves_flags))
    };
    tp
}

/// The calling thread's `pthread_self`.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
pub fn this_thread() -> usize {
    // SAFETY: pthread_self has no preconditions; it reads the thread pointer
    // (no system call, async-signal-safe in practice on glibc and macOS).
    unsafe { libc::pthread_self() as usize }
}

/// Whether the calling thread runs on its alternate signal stack
/// (`sigaltstack` queried, nothing changed).
pub fn signal_stack() -> SignalStack {
    // SAFETY: plain data, filled in by the kernel.
    let mut ss: libc::stack_t = unsafe { core::mem::zeroed() };
    // SAFETY: a NULL new stack only queries; `ss` is a valid out-pointer.
    if unsafe { sigaltstack(core::ptr::null(), &mut ss) } != 0 {
        return SignalStack::Unknown;
    }
    if ss.ss_flags & libc::SS_ONSTACK == 0 {
        return SignalStack::Elsewhere;
    }
    SignalStack::On {
        base: ss.ss_sp as usize,
        size: ss.ss_size,
    }
}
