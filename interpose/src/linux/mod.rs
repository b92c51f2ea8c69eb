//! Linux (glibc): the hooks are exported under their C names, and
//! `LD_PRELOAD` puts this library first, so the dynamic linker binds the
//! program's calls to them; the real functions are the next definitions of
//! those names (`dlsym(RTLD_NEXT)`, libc's normally). See the crate's
//! documentation for what each module provides.

mod children;
mod context;
mod dynsym;
mod exports;
mod file;
/// Per-thread hook frames for the longjmp recovery (ELF TLS, by assembly).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod frames;
mod hook_index;
pub mod hooks;
pub mod lastclose;
mod maps;
pub mod os;
mod policy;
pub(crate) mod proc;
pub mod real;
mod sandbox;
mod shm;
pub(crate) mod signatures;
mod symbols;
mod syscall;
/// Whether a hook runs on the process's descriptor table (vfork, unshare).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub mod table_owner;
/// Thread-locals by assembly (initial-exec ELF TLS).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod tls;
pub use sys::seccomp_mode;
pub(crate) mod sys;

/// Every hook Linux has: `crate::shared_hooks!` and those below, each
/// named in `hook_index.rs`. In brackets, what stands in for the real
/// function until the constructor has found it: `syscall SYS_NAME` (the raw
/// system call with the same arguments), a function of `real.rs` called
/// with them, or nothing (the hook has no real function of its own).
macro_rules! hook_table {
    ($generate:ident) => {
        crate::shared_hooks! { $generate
            posix_madvise(addr: *mut c_void, len: size_t, advice: c_int) -> c_int, [posix_madvise_fallback];
            mlock2(addr: *const c_void, len: size_t, flags: c_uint) -> c_int, [syscall SYS_mlock2];
            // Variadic in C (`...` holds new_address, read only with
            // MREMAP_FIXED). On the Linux ABIs munmapq builds for (x86_64,
            // aarch64, and every other 64-bit glibc target) a variadic
            // pointer argument travels in the same register as a fifth fixed
            // one, so a five-argument definition receives it.
            mremap(old: *mut c_void, old_size: size_t, new_size: size_t, flags: c_int, new_addr: *mut c_void) -> *mut c_void, [syscall SYS_mremap];
            pkey_mprotect(addr: *mut c_void, len: size_t, prot: c_int, pkey: c_int) -> c_int, [syscall SYS_pkey_mprotect];
            shmat(id: c_int, addr: *const c_void, flags: c_int) -> *mut c_void, [syscall SYS_shmat];
            // Older glibc has no `mseal` (then the name does not resolve and
            // the raw system call is used, and a program that finds the
            // export with dlsym gets the hooked system call).
            mseal(addr: *mut c_void, len: size_t, flags: c_ulong) -> c_int, [syscall SYS_mseal];
            // glibc's large-file name for mmap (git calls this one): on
            // 64-bit targets `off64_t` is `off_t`; mmap's hook and real
            // function serve it.
            mmap64(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void, [];
            // The end of an open file or of a file's name (lastclose.rs).
            close(fd: c_int) -> c_int, [syscall SYS_close];
            close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int, [syscall SYS_close_range];
            closefrom(lo: c_int) -> (), [closefrom_fallback];
            dup2(old: c_int, new: c_int) -> c_int, [dup2_fallback];
            dup3(old: c_int, new: c_int, flags: c_int) -> c_int, [syscall SYS_dup3];
            fclose(fp: *mut FILE) -> c_int, [fclose_fallback];
            // glibc exports these names of the same functions too (at a
            // public version, so a program may link against them): each runs
            // the hook of its plain name, with that name's real function
            // (`hook_index.rs`; `__vfork` is in `table_owner.rs`).
            __close(fd: c_int) -> c_int, [];
            __dup2(old: c_int, new: c_int) -> c_int, [];
            _IO_fclose(fp: *mut FILE) -> c_int, [];
            __clone(f: *mut c_void, stack: *mut c_void, flags: c_int, arg: *mut c_void, ptid: *mut pid_t, tls: *mut c_void, ctid: *mut pid_t) -> c_int, [];
            unlink(path: *const c_char) -> c_int, [unlink_fallback];
            unlinkat(dir: c_int, path: *const c_char, flags: c_int) -> c_int, [syscall SYS_unlinkat];
            remove(path: *const c_char) -> c_int, [remove_fallback];
            rename(old: *const c_char, new: *const c_char) -> c_int, [rename_fallback];
            renameat(old_dir: c_int, old: *const c_char, new_dir: c_int, new: *const c_char) -> c_int, [renameat_fallback];
            renameat2(old_dir: c_int, old: *const c_char, new_dir: c_int, new: *const c_char, flags: c_uint) -> c_int, [syscall SYS_renameat2];
            umount(target: *const c_char) -> c_int, [umount_fallback];
            umount2(target: *const c_char, flags: c_int) -> c_int, [syscall SYS_umount2];
            // glibc unlinks /dev/shm/NAME inside it, past `unlink`.
            shm_unlink(name: *const c_char) -> c_int, [shm_unlink_fallback];
            // A memory policy or advice a queued range must not carry into
            // a reuse (policy.rs). mbind is libnuma's (a system call).
            mbind(start: *mut c_void, len: c_ulong, mode: c_int, nodemask: *const c_ulong, maxnode: c_ulong, flags: c_uint) -> c_long, [syscall SYS_mbind];
            process_madvise(pidfd: c_int, iov: *const iovec, n: size_t, advice: c_int, flags: c_uint) -> ssize_t, [syscall SYS_process_madvise];
            // What the kernel takes from an mmap call's context: a
            // mount's flags, the thread's personality (context.rs).
            mount(src: *const c_char, target: *const c_char, fstype: *const c_char, flags: c_ulong, data: *const c_void) -> c_int, [syscall SYS_mount];
            mount_setattr(dir: c_int, path: *const c_char, flags: c_uint, attr: *mut c_void, size: size_t) -> c_int, [syscall SYS_mount_setattr];
            personality(persona: c_ulong) -> c_int, [syscall SYS_personality];
            // A thread that unshares its descriptor table leaves the one
            // the engine's records describe (table_owner.rs).
            unshare(flags: c_int) -> c_int, [syscall SYS_unshare];
            // Children no atfork handler hears of; glibc's clone with
            // CLONE_VM runs its child in this memory (children.rs). clone is
            // variadic after `arg`, as syscall is: see there.
            clone(f: *mut c_void, stack: *mut c_void, flags: c_int, arg: *mut c_void, ptid: *mut pid_t, tls: *mut c_void, ctid: *mut pid_t) -> c_int, [clone_fallback];
            _Fork() -> pid_t, [fork_fallback];
            // A seccomp filter may kill on munmapq's own calls (sandbox.rs).
            // Both variadic in C: see mremap; `syscall`'s sixth variadic
            // argument is on the stack on x86_64 as a seventh fixed one's.
            prctl(option: c_int, a2: c_ulong, a3: c_ulong, a4: c_ulong, a5: c_ulong) -> c_int, [syscall SYS_prctl];
            syscall(nr: c_long, a1: c_long, a2: c_long, a3: c_long, a4: c_long, a5: c_long, a6: c_long) -> c_long, [syscall_raw];
            // RLIMIT_AS lowered: the queue must not take the room (sandbox.rs).
            setrlimit(resource: c_int, rlim: *const rlimit) -> c_int, [setrlimit_raw];
            setrlimit64(resource: c_int, rlim: *const rlimit) -> c_int, [setrlimit_raw];
            prlimit(pid: pid_t, resource: c_int, new: *const rlimit, old: *mut rlimit) -> c_int, [prlimit_raw];
            prlimit64(pid: pid_t, resource: c_int, new: *const rlimit, old: *mut rlimit) -> c_int, [prlimit_raw];
        }
    };
}
use hook_table;
