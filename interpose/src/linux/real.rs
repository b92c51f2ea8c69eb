//! The real functions: resolved once, at load time, as `dlsym(RTLD_NEXT)`
//! would (so another preloaded library below us still sees its calls), all
//! in one walk of the loaded objects' symbol tables (symbols.rs); before
//! that, and if a name does not resolve, the stand-in of its `hook_table!`
//! entry (the raw system call). Nothing here is ever looked up from inside
//! a hook.

use super::symbols::{self, Name};
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use libc::{c_char, c_int, c_uint, c_ulong, c_void, off_t, size_t, FILE};
// The types of sandbox.rs's hooks.
use libc::{c_long, pid_t, rlimit};
// The types of policy.rs's hooks.
use libc::{iovec, ssize_t};

/// For each entry of `hook_table!` with a stand-in: a slot, filled by
/// `resolve`, and a function of the entry's name that calls through it.
/// A slot holds the entry's stand-in until `resolve` finds the real
/// function (and keeps it where the name resolves to nothing), so that a
/// call through it is one indirect call with nothing to test first; that
/// costs the loader one relative relocation per entry at start. The
/// helpers' slots start empty (0: not found).
macro_rules! real_functions {
    (shared { $($shared:tt)* } platform { $($platform:tt)* }) => {
        real_functions!(@all $($shared)* $($platform)*);
    };
    (@all $( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty, [$($stand_in:tt)*]; )*) => {
        // Besides the hooks' real functions: vfork (its export cannot be an
        // ordinary function), functions of the C library that the
        // library calls for itself at load only (found as the real
        // functions are, which costs less than an import bound at load),
        // and one variable of it, read by the close hooks.
        real_functions!(
            @helpers [vfork dlsym __register_atfork sysconf abort fileno pthread_setcancelstate pthread_testcancel _pthread_cleanup_push _pthread_cleanup_pop __libc_single_threaded]
            $( $name [$($stand_in)*] )*
        );

        /// Resolves every real function. Called once, from the constructor.
        pub fn resolve() {
            static NAMES: [Name; SLOT_COUNT] = symbols::names(SLOT_NAMES);
            // libc is the object that holds the `dl_iterate_phdr` this
            // library is bound to (an import, never an export).
            let libc = libc::dl_iterate_phdr as *const () as usize;
            let libc_after_us = symbols::resolve(
                SLOT_NAMES.as_bytes(),
                &NAMES,
                &SLOTS,
                Slot::dlsym as usize,
                libc,
            );
            INTERPOSED.store(libc_after_us.unwrap_or(true), Ordering::Relaxed);
            // The C library's functions the library calls for itself (the
            // first slots), wherever they are: a library loaded by dlopen
            // comes after the C library.
            symbols::resolve_anywhere(
                SLOT_NAMES.as_bytes(),
                &NAMES[..HELPERS],
                &SLOTS[..HELPERS],
            );
            PAGE.store(ask_page_size(), Ordering::Relaxed);
        }

        /// The stand-ins, out of the hooks' way (one that sets errno needs
        /// a frame): only before `resolve`, or where the name did not
        /// resolve.
        mod stand_in {
            #[allow(unused_imports)]
            use super::*;
            $( real_functions!(@stand_in_function $name ($($arg: $ty),*) -> $ret, [$($stand_in)*]); )*
        }

        $( real_functions!(@function $name ($($arg: $ty),*) -> $ret, [$($stand_in)*]); )*
    };

    (@helpers [$($helper:ident)*] $($rest:tt)*) => {
        /// How many slots, first, are not the hooks' real functions.
        const HELPERS: usize = [$(stringify!($helper),)*].len();
        real_functions!(@slots [$($helper)*] [] $($rest)*);
    };

    // The entries that have a slot, gathered into `Slot` and `SLOT_NAMES`.
    (@slots [$($helper:ident)*] [$($slot:ident)*]) => {
        /// The index of each real function's slot in `SLOTS`.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy)]
        enum Slot { $($helper,)* $($slot,)* }
        /// The names of the slots, in order, each followed by a NUL.
        const SLOT_NAMES: &str = concat!($(stringify!($helper), "\0",)* $(stringify!($slot), "\0",)*);
        const SLOT_COUNT: usize = [$(Slot::$helper,)* $(Slot::$slot,)*].len();
        /// Each helper's address, null until `resolve` (or if the name
        /// resolved to nothing); each real function's, its stand-in until
        /// `resolve`.
        static SLOTS: [AtomicPtr<()>; SLOT_COUNT] = [
            $(real_functions!(@empty $helper),)*
            $(AtomicPtr::new(stand_in::$slot as *mut ()),)*
        ];
    };
    (@slots [$($helper:ident)*] [$($slot:ident)*] $name:ident [] $($rest:tt)*) => {
        real_functions!(@slots [$($helper)*] [$($slot)*] $($rest)*);
    };
    (@slots [$($helper:ident)*] [$($slot:ident)*] $name:ident [$($stand_in:tt)+] $($rest:tt)*) => {
        real_functions!(@slots [$($helper)*] [$($slot)* $name] $($rest)*);
    };
    (@empty $helper:ident) => {
        AtomicPtr::new(core::ptr::null_mut())
    };

    (@stand_in_function $name:ident ($($arg:ident : $ty:ty),*) -> $ret:ty, []) => {};
    (@stand_in_function $name:ident ($($arg:ident : $ty:ty),*) -> $ret:ty, [$($stand_in:tt)+]) => {
        #[cold]
        #[allow(non_snake_case, clippy::too_many_arguments)]
        pub(super) unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            real_functions!(@stand_in ($($arg),*) -> $ret, $($stand_in)+)
        }
    };

    (@function $name:ident ($($arg:ident : $ty:ty),*) -> $ret:ty, []) => {};
    (@function $name:ident ($($arg:ident : $ty:ty),*) -> $ret:ty, [$($stand_in:tt)+]) => {
        /// Calls the real function (its stand-in before `resolve`).
        ///
        /// # Safety
        /// The caller passes what the C function accepts.
        #[allow(non_snake_case, clippy::too_many_arguments)]
        #[inline(always)]
        pub unsafe fn $name($($arg: $ty),*) -> $ret {
            let f = SLOTS[Slot::$name as usize].load(Ordering::Acquire);
            // SAFETY: `f` is the next definition of this exact C function
            // (symbols.rs), whose prototype is the one declared here, or
            // the stand-in of that prototype.
            let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { core::mem::transmute(f) };
            // SAFETY: forwarded from our caller's contract.
            unsafe { f($($arg),*) }
        }
    };

    (@stand_in ($($arg:ident),*) -> $ret:ty, syscall $number:ident) => {
        // SAFETY: the raw system call with the arguments the libc wrapper
        // would pass; the kernel validates them.
        unsafe { super::super::sys::call_errno(libc::$number, &[$($arg as libc::c_long),*]) as $ret }
    };
    (@stand_in ($($arg:ident),*) -> $ret:ty, $function:ident) => {
        super::$function($($arg),*)
    };
}

/// The address in slot `s` (0 for a helper not found).
#[inline(always)]
fn address(s: Slot) -> usize {
    SLOTS[s as usize].load(Ordering::Acquire) as usize
}

super::hook_table!(real_functions);

/// An address in the C library's code: its `munmap` (0 before `resolve`,
/// or where it found none).
pub fn libc_address() -> usize {
    let a = address(Slot::munmap);
    if a == stand_in::munmap as *const () as usize {
        0
    } else {
        a
    }
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

/// `pthread_testcancel`, if the program has it (before glibc 2.34 it
/// lives in libpthread, which a program need not load: found wherever it
/// is, not linked).
pub fn testcancel() {
    let f = address(Slot::pthread_testcancel);
    // Both or neither (see `setcancelstate`).
    if f != 0 && address(Slot::pthread_setcancelstate) != 0 {
        // SAFETY: the C library's `void pthread_testcancel(void)`.
        let f: unsafe extern "C" fn() = unsafe { core::mem::transmute(f) };
        // SAFETY: no arguments; it may unwind the thread (cancellation).
        unsafe { f() };
    }
}

/// `pthread_setcancelstate(state, &old)`, answering `old`; `state` itself
/// if the program has no such function (nothing to change then).
pub fn setcancelstate(state: c_int) -> c_int {
    let f = address(Slot::pthread_setcancelstate);
    if f == 0 || address(Slot::pthread_testcancel) == 0 {
        return state;
    }
    // SAFETY: the C library's `int pthread_setcancelstate(int, int *)`.
    let f: unsafe extern "C" fn(c_int, *mut c_int) -> c_int = unsafe { core::mem::transmute(f) };
    let mut old = state;
    // SAFETY: a valid out-pointer.
    unsafe { f(state, &mut old) };
    old
}

/// Whether the process never had a second thread, as glibc (2.32 on)
/// says in `__libc_single_threaded`; false where it has no such variable.
/// The definition is the C library's own (found after this library):
/// since 2.36 that is the one glibc's own calls test, which
/// `pthread_create` and `pthread_cancel` clear, whatever copy a program
/// holds of it, so while it is true glibc's `close` and `write` are no
/// cancellation points. From 2.32 to 2.35 a program holding a copy (a
/// copy relocation: C++ built with GCC 11 and later reads it inline)
/// leaves the C library's at 0, which only costs the slower way; and a
/// thread that cancels itself there is not told (see `close` in
/// lastclose.rs).
#[inline]
pub fn single_threaded() -> bool {
    single_threaded_word().is_some_and(|w| w.load(Ordering::Relaxed) != 0)
}

/// The C library's `__libc_single_threaded`, if it has one (see
/// [`single_threaded`]).
pub fn single_threaded_word() -> Option<&'static core::sync::atomic::AtomicU8> {
    let p = address(Slot::__libc_single_threaded);
    // SAFETY: the C library's `char __libc_single_threaded`, which lives
    // as long as the C library; a byte, read atomically.
    (p != 0).then(|| unsafe { &*(p as *const core::sync::atomic::AtomicU8) })
}

/// glibc's `struct _pthread_cleanup_buffer`: a cleanup handler kept in
/// the frame that registers it.
#[repr(C)]
pub struct CleanupBuffer {
    routine: usize,
    arg: *mut c_void,
    canceltype: c_int,
    prev: *mut c_void,
}

impl CleanupBuffer {
    pub const fn new() -> Self {
        CleanupBuffer {
            routine: 0,
            arg: core::ptr::null_mut(),
            canceltype: 0,
            prev: core::ptr::null_mut(),
        }
    }
}

/// Registers `routine(arg)` to run if the thread is cancelled (or calls
/// `pthread_exit`) while `buf`'s frame is on the stack: glibc runs the
/// handlers of `_pthread_cleanup_push` as its forced unwinding leaves
/// their frames (`nptl/unwind.c`). Answers false, registering nothing,
/// where the program has no such function. `buf` must stay where it is
/// until [`cleanup_pop`], in the same frame.
///
/// # Safety
/// `buf` lives in the caller's frame and is popped before that frame
/// returns; `routine` may run with `arg` until then.
pub unsafe fn cleanup_push(
    buf: *mut CleanupBuffer,
    routine: unsafe extern "C" fn(*mut c_void),
    arg: *mut c_void,
) -> bool {
    let push = address(Slot::_pthread_cleanup_push);
    if push == 0 || address(Slot::_pthread_cleanup_pop) == 0 {
        return false;
    }
    // SAFETY: glibc's `void _pthread_cleanup_push(struct
    // _pthread_cleanup_buffer *, void (*)(void *), void *)`.
    let push: unsafe extern "C" fn(
        *mut CleanupBuffer,
        unsafe extern "C" fn(*mut c_void),
        *mut c_void,
    ) = unsafe { core::mem::transmute(push) };
    // SAFETY: as the caller promises.
    unsafe { push(buf, routine, arg) };
    true
}

/// Unregisters `buf` (after a [`cleanup_push`] that answered true)
/// without running it.
///
/// # Safety
/// `buf` is the innermost handler registered on this thread.
pub unsafe fn cleanup_pop(buf: *mut CleanupBuffer) {
    let pop = address(Slot::_pthread_cleanup_pop);
    // SAFETY: glibc's `void _pthread_cleanup_pop(struct
    // _pthread_cleanup_buffer *, int)`, resolved with its push.
    let pop: unsafe extern "C" fn(*mut CleanupBuffer, c_int) = unsafe { core::mem::transmute(pop) };
    // SAFETY: as the caller promises.
    unsafe { pop(buf, 0) };
}

/// The real `vfork`'s address, for `table_owner.rs`'s trampoline: 0
/// before `resolve` (or if none resolved).
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]
pub fn vfork_address() -> usize {
    address(Slot::vfork)
}

/// The page size (`sysconf(_SC_PAGESIZE)`, asked once by `resolve`), 0
/// if unknown.
pub fn page_size() -> usize {
    PAGE.load(Ordering::Relaxed)
}

static PAGE: AtomicUsize = AtomicUsize::new(0);

fn ask_page_size() -> usize {
    let f = address(Slot::sysconf);
    if f == 0 {
        return 0;
    }
    // SAFETY: the C library's sysconf (its prototype), which has no
    // memory-safety preconditions.
    let page = unsafe {
        let sysconf: unsafe extern "C" fn(c_int) -> c_long = core::mem::transmute(f);
        sysconf(libc::_SC_PAGESIZE)
    };
    if page > 0 && (page as usize).is_power_of_two() {
        page as usize
    } else {
        0
    }
}

/// Ends the process as the C library's `abort` does; before `resolve` (a
/// panic, which nothing expects, that early) by an illegal instruction.
pub fn abort() -> ! {
    let f = address(Slot::abort);
    if f != 0 {
        // SAFETY: the C library's abort (its prototype), which does not
        // return.
        unsafe {
            let abort: unsafe extern "C" fn() -> ! = core::mem::transmute(f);
            abort()
        }
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: traps; nothing follows.
    unsafe {
        core::arch::asm!("ud2", options(noreturn))
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: traps; nothing follows.
    unsafe {
        core::arch::asm!("brk #1", options(noreturn))
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    loop {
        core::hint::spin_loop();
    }
}

/// The C library's `__register_atfork` (what glibc's `pthread_atfork`
/// calls), 0 if none was found.
pub fn register_atfork_address() -> usize {
    address(Slot::__register_atfork)
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
    let fd = unsafe { fileno(fp) };
    // SAFETY: the raw system call.
    raw(unsafe { super::sys::call_errno(libc::SYS_close, &[fd as libc::c_long]) })
}

/// The descriptor of stream `fp`: the C library's `fileno` (found by the
/// walk, rather than bound at load); before `resolve`, the `_fileno` field
/// of glibc's public `struct _IO_FILE` (after `_flags` and 13 pointers).
///
/// # Safety
/// `fp` is a valid stream.
pub unsafe fn fileno(fp: *mut FILE) -> c_int {
    let f = address(Slot::fileno);
    if f != 0 {
        // SAFETY: the C library's fileno (its prototype), on the caller's
        // stream.
        return unsafe {
            let fileno: unsafe extern "C" fn(*mut FILE) -> c_int = core::mem::transmute(f);
            fileno(fp)
        };
    }
    const FILENO_OFFSET: usize = 8 + 13 * core::mem::size_of::<usize>();
    // SAFETY: the caller's stream, a glibc `FILE`; the field is an int.
    unsafe { fp.cast::<u8>().add(FILENO_OFFSET).cast::<c_int>().read() }
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

/// Whether the program's calls reach the hooks, as the constructor found
/// (`resolve`): whether this library comes before libc in the load order
/// of the main namespace, which is the order of the program's lookup scope
/// that binds its calls. A library loaded by `dlopen` comes after libc:
/// loaded, not interposed. libc is the object that holds the
/// `dl_iterate_phdr` this library is bound to (an import, never an
/// export), looked for among the objects the walk after this library
/// (symbols.rs) goes through. Not `dlsym(RTLD_DEFAULT)`: glibc searches the
/// *calling* object's scope, which for a `dlopen`ed library finds its own
/// export first. Unknown (the walk did not find this library in the list):
/// taken as interposed.
pub fn interposed() -> bool {
    INTERPOSED.load(Ordering::Relaxed)
}

static INTERPOSED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(true);
