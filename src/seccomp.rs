//! The launcher under a seccomp filter (a container, systemd's
//! `SystemCallFilter=`): the command inherits it, and the library, finding
//! it at load, passes every call through unless `MUNMAPQ_SECCOMP=trust`
//! says the filter allows munmapq's own system calls. The launcher finds
//! out by making those calls in a forked child: one killed, or answered
//! with an error, means the filter does not allow them.

/// What the command will run under.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Sandbox {
    /// No filter (or no seccomp on this system).
    None,
    /// A filter that allowed every call munmapq makes.
    Allows,
    /// A filter that killed or refused one of them.
    Refuses,
}

/// Under a filter, probes it (see the module's documentation).
#[cfg(target_os = "linux")]
pub fn probe() -> Sandbox {
    // SAFETY: PR_GET_SECCOMP takes no pointer.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP) };
    if mode == 0
        || (mode < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL))
    {
        return Sandbox::None;
    }
    // SAFETY: the child makes raw system calls only and _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Sandbox::Refuses;
    }
    if pid == 0 {
        // SAFETY: each call is valid on its own arguments (see `calls`).
        let code = if unsafe { calls() } { 0 } else { 1 };
        // SAFETY: ends the child without running the launcher's exit code.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Sandbox::Refuses;
        }
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Sandbox::Allows
    } else {
        Sandbox::Refuses
    }
}

/// macOS has no seccomp.
#[cfg(not(target_os = "linux"))]
pub fn probe() -> Sandbox {
    Sandbox::None
}

/// The system calls the library makes (interpose/src/linux: `file.rs`,
/// `os.rs`, `proc.rs`, `sys.rs`, `sandbox.rs`, `init.rs`, `context.rs`), each on valid
/// arguments: true if every one succeeded.
///
/// # Safety
/// Only in a forked child (it maps and unmaps, blocks signals).
#[cfg(target_os = "linux")]
unsafe fn calls() -> bool {
    use libc::{c_long, syscall as sc};
    // SAFETY: no memory-safety preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as usize,
        _ => return false,
    };
    let mut buf = [0u8; 512];
    // SAFETY: raw system calls on our own buffers, our own descriptor and
    // our own fresh mapping.
    unsafe {
        let fd = sc(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/proc/self/statm".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return false;
        }
        let mut ok = sc(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len()) > 0;
        let mut sx: libc::statx = std::mem::zeroed();
        let mask = libc::STATX_TYPE | libc::STATX_INO | libc::STATX_MNT_ID_UNIQUE;
        ok &= sc(
            libc::SYS_statx,
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            mask,
            &mut sx,
        ) == 0;
        let mut st: libc::stat = std::mem::zeroed();
        ok &= sc(libc::SYS_fstat, fd, &mut st) == 0;
        let mut sf: libc::statfs = std::mem::zeroed();
        ok &= sc(libc::SYS_fstatfs, fd, &mut sf) == 0;
        ok &= sc(libc::SYS_fcntl, fd, libc::F_GETFL) >= 0;
        // The name of a file with several links (file.rs reads
        // /proc/self/fd/N; a filter sees the number, not the path).
        ok &= sc(
            libc::SYS_readlinkat,
            libc::AT_FDCWD,
            c"/proc/self/exe".as_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
        ) > 0;
        let p = sc(
            libc::SYS_mmap,
            0 as c_long,
            page,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1 as c_long,
            0 as c_long,
        );
        ok &= p > 0;
        if p > 0 {
            ok &= sc(libc::SYS_madvise, p, page, libc::MADV_DONTNEED) == 0;
            ok &= sc(libc::SYS_munmap, p, page) == 0;
        }
        ok &= sc(libc::SYS_close, fd) == 0;
        let (all, mut old) = (!0u64, 0u64);
        ok &= sc(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, &all, &mut old, 8) == 0;
        ok &= sc(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &old,
            0 as c_long,
            8,
        ) == 0;
        let mut rl: libc::rlimit = std::mem::zeroed();
        ok &= sc(
            libc::SYS_prlimit64,
            0 as c_long,
            libc::RLIMIT_AS,
            0 as c_long,
            &mut rl,
        ) == 0;
        ok &= sc(libc::SYS_getpid) > 0;
        // Asked only, once the program changed its personality (context.rs).
        ok &= sc(libc::SYS_personality, 0xffff_ffff as c_long) >= 0;
        ok &= sc(libc::SYS_sched_yield) == 0;
        let mut ss: libc::stack_t = std::mem::zeroed();
        ok &= sc(libc::SYS_sigaltstack, 0 as c_long, &mut ss) == 0;
        ok
    }
}
