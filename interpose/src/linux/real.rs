//! The real functions: resolved once, at load time, with `dlsym(RTLD_NEXT)`
//! (so another preloaded library below us still sees its calls); before
//! that, and if a name does not resolve, the stand-in of its `hook_table!`
//! entry (the raw system call). Nothing here is ever looked up from inside
//! a hook.

use core::sync::atomic::Ordering;
use libc::{c_char, c_int, c_uint, c_ulong, c_void, off_t, size_t, FILE};
// The types of sandbox.rs's hooks.
use libc::{c_long, pid_t, rlimit};
// The types of policy.rs's and sharing.rs's hooks.
use libc::{
    iovec, mmsghdr, msghdr, posix_spawn_file_actions_t, posix_spawnattr_t, ssize_t, timespec,
};

/// For each entry of `hook_table!` with a stand-in: a slot, filled by
/// `resolve`, and a function of the entry's name that calls through it.
macro_rules! real_functions {
    (shared { $($shared:tt)* } platform { $($platform:tt)* }) => {
        real_functions!(@all $($shared)* $($platform)*);
    };
    (@all $( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty, [$($stand_in:tt)*]; )*) => {
        #[allow(non_upper_case_globals)]
        mod slots {
            use core::sync::atomic::AtomicUsize;
            $( real_functions!(@slot $name [$($stand_in)*]); )*
        }

        /// Resolves every real function. Called once, from the constructor.
        pub fn resolve() {
            $( real_functions!(@resolve $name [$($stand_in)*]); )*
            resolve_vfork();
            resolve_cancellation();
        }

        $( real_functions!(@function $name ($($arg: $ty),*) -> $ret, [$($stand_in)*]); )*
    };

    (@slot $name:ident []) => {};
    (@slot $name:ident [$($stand_in:tt)+]) => {
        pub static $name: AtomicUsize = AtomicUsize::new(0);
    };

    (@resolve $name:ident []) => {};
    (@resolve $name:ident [$($stand_in:tt)+]) => {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds the
        // definition after this library (libc's, normally).
        let f = unsafe {
            libc::dlsym(libc::RTLD_NEXT, concat!(stringify!($name), "\0").as_ptr().cast())
        };
        slots::$name.store(f as usize, Ordering::Release);
    };

    (@function $name:ident ($($arg:ident : $ty:ty),*) -> $ret:ty, []) => {};
    (@function $name:ident ($($arg:ident : $ty:ty),*) -> $ret:ty, [$($stand_in:tt)+]) => {
        /// Calls the real function (its stand-in before `resolve`).
        ///
        /// # Safety
        /// The caller passes what the C function accepts.
        #[allow(non_snake_case, clippy::too_many_arguments)]
        pub unsafe fn $name($($arg: $ty),*) -> $ret {
            let f = slots::$name.load(Ordering::Acquire);
            if f == 0 {
                return real_functions!(@stand_in ($($arg),*) -> $ret, $($stand_in)+);
            }
            // SAFETY: `f` came from dlsym for this exact C function, whose
            // prototype is the one declared here.
            let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { core::mem::transmute(f) };
            // SAFETY: forwarded from our caller's contract.
            unsafe { f($($arg),*) }
        }
    };

    (@stand_in ($($arg:ident),*) -> $ret:ty, syscall $number:ident) => {
        // SAFETY: the raw system call with the arguments the libc wrapper
        // would pass; the kernel validates them.
        unsafe { super::sys::call_errno(libc::$number, &[$($arg as libc::c_long),*]) as $ret }
    };
    (@stand_in ($($arg:ident),*) -> $ret:ty, $function:ident) => {
        $function($($arg),*)
    };
}

super::hook_table!(real_functions);

/// Stand-ins for sharing.rs's spawns before `resolve` (nothing spawns
/// that early): the call fails as if the system had no room.
fn spawn_fallback(
    _: *mut pid_t,
    _: *const c_char,
    _: *const posix_spawn_file_actions_t,
    _: *const posix_spawnattr_t,
    _: *const *mut c_char,
    _: *const *mut c_char,
) -> c_int {
    libc::EAGAIN
}

fn system_fallback(_: *const c_char) -> c_int {
    -1
}

fn popen_fallback(_: *const c_char, _: *const c_char) -> *mut FILE {
    core::ptr::null_mut()
}

/// Stand-ins for `clone` and `_Fork` before `resolve` (nothing makes a
/// child that early): the call fails as if the system had no room.
#[allow(clippy::too_many_arguments)]
fn clone_fallback(
    _: *mut c_void,
    _: *mut c_void,
    _: c_int,
    _: *mut c_void,
    _: *mut pid_t,
    _: *mut c_void,
    _: *mut pid_t,
) -> c_int {
    crate::errno::set(libc::EAGAIN);
    -1
}

fn fork_fallback() -> pid_t {
    crate::errno::set(libc::EAGAIN);
    -1
}

/// The real `vfork`, for `table_owner.rs`'s trampoline (not in
/// `hook_table!`: its export cannot be an ordinary function).
static VFORK: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

fn resolve_vfork() {
    // SAFETY: dlsym with a NUL-terminated name (see `resolve`).
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"vfork".as_ptr()) };
    VFORK.store(f as usize, Ordering::Release);
}

/// glibc's `pthread_setcancelstate` and `pthread_testcancel`, for the
/// close hooks (`lastclose.rs`): looked up, not linked, because before
/// glibc 2.34 they live in libpthread, which a program need not load.
static SETCANCELSTATE: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
static TESTCANCEL: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

fn resolve_cancellation() {
    // SAFETY: dlsym with NUL-terminated names; RTLD_DEFAULT finds them
    // wherever the program loaded them.
    let (set, test) = unsafe {
        (
            libc::dlsym(libc::RTLD_DEFAULT, c"pthread_setcancelstate".as_ptr()),
            libc::dlsym(libc::RTLD_DEFAULT, c"pthread_testcancel".as_ptr()),
        )
    };
    // Both or neither.
    if !set.is_null() && !test.is_null() {
        SETCANCELSTATE.store(set as usize, Ordering::Release);
        TESTCANCEL.store(test as usize, Ordering::Release);
    }
}

/// `pthread_testcancel`, if the program has it.
pub fn testcancel() {
    let f = TESTCANCEL.load(Ordering::Acquire);
    if f != 0 {
        // SAFETY: glibc's `void pthread_testcancel(void)`, from dlsym.
        let f: unsafe extern "C" fn() = unsafe { core::mem::transmute(f) };
        // SAFETY: no arguments; it may unwind the thread (cancellation).
        unsafe { f() };
    }
}

/// `pthread_setcancelstate(state, &old)`, answering `old`; `state` itself
/// if the program has no such function (nothing to change then).
pub fn setcancelstate(state: c_int) -> c_int {
    let f = SETCANCELSTATE.load(Ordering::Acquire);
    if f == 0 {
        return state;
    }
    // SAFETY: glibc's `int pthread_setcancelstate(int, int *)`, from dlsym.
    let f: unsafe extern "C" fn(c_int, *mut c_int) -> c_int = unsafe { core::mem::transmute(f) };
    let mut old = state;
    // SAFETY: a valid out-pointer.
    unsafe { f(state, &mut old) };
    old
}

/// The real `vfork`'s address, 0 before `resolve` (or if none resolved).
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]
pub fn vfork_address() -> usize {
    VFORK.load(Ordering::Acquire)
}

/// glibc's posix_madvise: DONTNEED is ignored, errors are returned, not set.
fn posix_madvise_fallback(addr: *mut c_void, len: size_t, advice: c_int) -> c_int {
    if advice == libc::POSIX_MADV_DONTNEED {
        return 0;
    }
    // SAFETY: the raw system call with the caller's arguments; the kernel
    // validates them.
    match unsafe {
        super::sys::call(
            libc::SYS_madvise,
            &[
                addr as libc::c_long,
                len as libc::c_long,
                advice as libc::c_long,
            ],
        )
    } {
        0 => 0,
        e => -e as c_int,
    }
}

// Stand-ins for the calls of `lastclose.rs` that have no system call of
// their own on every target (only until `resolve`).

fn raw(r: libc::c_long) -> c_int {
    r as c_int
}

fn closefrom_fallback(lo: c_int) {
    // SAFETY: the raw system call; the kernel validates the range.
    unsafe {
        super::sys::call_errno(
            libc::SYS_close_range,
            &[lo as libc::c_long, c_uint::MAX as libc::c_long, 0],
        )
    };
}

fn dup2_fallback(old: c_int, new: c_int) -> c_int {
    if old == new {
        // dup2 of a descriptor onto itself checks it and answers it.
        // SAFETY: F_GETFD only reads; a bad fd makes it fail.
        let r = raw(unsafe {
            super::sys::call_errno(
                libc::SYS_fcntl,
                &[old as libc::c_long, libc::F_GETFD as libc::c_long],
            )
        });
        return if r < 0 { r } else { new };
    }
    // SAFETY: the raw system call with the caller's arguments.
    raw(unsafe {
        super::sys::call_errno(
            libc::SYS_dup3,
            &[old as libc::c_long, new as libc::c_long, 0],
        )
    })
}

fn fclose_fallback(fp: *mut FILE) -> c_int {
    // Without libc's fclose only the descriptor can be closed.
    // SAFETY: the caller's stream.
    let fd = unsafe { libc::fileno(fp) };
    // SAFETY: the raw system call.
    raw(unsafe { super::sys::call_errno(libc::SYS_close, &[fd as libc::c_long]) })
}

fn unlink_fallback(path: *const c_char) -> c_int {
    // SAFETY: the raw system call with the caller's path.
    raw(unsafe {
        super::sys::call_errno(
            libc::SYS_unlinkat,
            &[libc::AT_FDCWD as libc::c_long, path as libc::c_long, 0],
        )
    })
}

fn remove_fallback(path: *const c_char) -> c_int {
    let r = unlink_fallback(path);
    if r == 0 || crate::errno::get() != libc::EISDIR {
        return r;
    }
    // SAFETY: the raw system call with the caller's path.
    raw(unsafe {
        super::sys::call_errno(
            libc::SYS_unlinkat,
            &[
                libc::AT_FDCWD as libc::c_long,
                path as libc::c_long,
                libc::AT_REMOVEDIR as libc::c_long,
            ],
        )
    })
}

fn renameat_fallback(od: c_int, old: *const c_char, nd: c_int, new: *const c_char) -> c_int {
    // SAFETY: the raw system call with the caller's arguments.
    raw(unsafe {
        super::sys::call_errno(
            libc::SYS_renameat2,
            &[
                od as libc::c_long,
                old as libc::c_long,
                nd as libc::c_long,
                new as libc::c_long,
                0,
            ],
        )
    })
}

fn rename_fallback(old: *const c_char, new: *const c_char) -> c_int {
    renameat_fallback(libc::AT_FDCWD, old, libc::AT_FDCWD, new)
}

/// glibc's shm_unlink: unlinks `/dev/shm/NAME`.
fn shm_unlink_fallback(name: *const c_char) -> c_int {
    let mut path: super::shm::ShmPath = [0; core::mem::size_of::<super::shm::ShmPath>()];
    if !super::shm::shm_path(name, &mut path) {
        crate::errno::set(libc::EINVAL);
        return -1;
    }
    unlink_fallback(path.as_ptr().cast())
}

fn umount_fallback(target: *const c_char) -> c_int {
    // SAFETY: the raw system call with the caller's path.
    raw(unsafe { super::sys::call_errno(libc::SYS_umount2, &[target as libc::c_long, 0]) })
}

// Stand-ins for the calls of `sandbox.rs` (also used there after `resolve`,
// where it must reach the kernel without going through a hook).

/// The real `syscall` before the constructor has found it.
pub fn syscall_raw(
    nr: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    a4: c_long,
    a5: c_long,
    a6: c_long,
) -> c_long {
    // SAFETY: the caller's own arguments, as libc's `syscall` passes them.
    unsafe { super::sys::call_errno(nr, &[a1, a2, a3, a4, a5, a6]) }
}

/// What glibc's `setrlimit` does (`prlimit64` on this process).
pub fn setrlimit_raw(resource: c_int, new: *const rlimit) -> c_int {
    prlimit_raw(0, resource, new, core::ptr::null_mut())
}

/// The `prlimit64` system call, as glibc's wrapper makes it.
pub fn prlimit_raw(pid: pid_t, resource: c_int, new: *const rlimit, old: *mut rlimit) -> c_int {
    // SAFETY: the caller's own arguments; the kernel checks the pointers.
    unsafe {
        super::sys::call_errno(
            libc::SYS_prlimit64,
            &[
                pid as c_long,
                resource as c_long,
                new as c_long,
                old as c_long,
            ],
        ) as c_int
    }
}

/// Whether the program's calls reach the hooks: this library comes before
/// libc in the process's load order (`dl_iterate_phdr` walks the link maps
/// in it: the program, the `LD_PRELOAD` libraries, its dependencies, then
/// what `dlopen` loaded), which is the order of the main program's lookup
/// scope that binds its calls. A library loaded by `dlopen` comes after
/// libc: loaded, not interposed. libc is the object that holds
/// `dl_iterate_phdr` (an import of this library, never an export). Not
/// `dlsym(RTLD_DEFAULT)`: glibc searches the *calling* object's scope, which
/// for a `dlopen`ed library finds its own export first; nor `RTLD_NEXT`,
/// which finds nothing after a `dlopen`ed library that does not link libc
/// itself. Load time only.
pub fn interposed() -> bool {
    struct Order {
        addrs: [usize; 2],
        at: [usize; 2],
        seen: usize,
    }
    extern "C" fn visit(info: *mut libc::dl_phdr_info, _: size_t, data: *mut c_void) -> c_int {
        // SAFETY: `data` is the `Order` below, `info` the loader's record
        // of one object, valid during the call, its headers `dlpi_phnum`
        // long.
        let (order, info) = unsafe { (&mut *data.cast::<Order>(), &*info) };
        let phdrs = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            // SAFETY: as above.
            unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) }
        };
        for (i, &a) in order.addrs.iter().enumerate() {
            let inside = phdrs.iter().any(|p| {
                let lo = (info.dlpi_addr as usize).wrapping_add(p.p_vaddr as usize);
                p.p_type == libc::PT_LOAD && a >= lo && a - lo < p.p_memsz as usize
            });
            if inside && order.at[i] == usize::MAX {
                order.at[i] = order.seen;
            }
        }
        order.seen += 1;
        0
    }
    let ours = interposed as *const () as usize;
    let libc = libc::dl_iterate_phdr as *const () as usize;
    let mut order = Order {
        addrs: [ours, libc],
        at: [usize::MAX; 2],
        seen: 0,
    };
    // SAFETY: a plain callback and a pointer to `order`, which outlives
    // the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut order as *mut Order).cast()) };
    // Unknown (either not found): taken as interposed.
    order.at[0] == usize::MAX || order.at[1] == usize::MAX || order.at[0] < order.at[1]
}
