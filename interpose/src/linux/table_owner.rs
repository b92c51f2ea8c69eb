//! Linux: whether the calling thread uses the descriptor table the
//! engine's per-descriptor records describe (`Os::fd_table`).
//!
//! Two ways a hook can run on another table in munmapq's memory:
//!
//! - a `vfork` child (Python's `subprocess`, anything calling `vfork`,
//!   then `close_range`/`close`/`dup2` before `execve`) runs on the
//!   parent's memory, the parent's thread's stack and TLS included, with
//!   a copy of the table. `vfork` is exported here as a two-instruction
//!   trampoline (it cannot be an ordinary function: the child returns
//!   from it first and reuses its stack frame before the parent does):
//!   it writes the process's pid into a thread-local word, then jumps to
//!   the real `vfork`. The child inherits the word (same TLS memory): a
//!   hook that finds it set asks `getpid`; another pid is the child. The
//!   parent's first such hook after the child exec'd or exited finds its
//!   own pid and clears the word. So the common path costs one
//!   thread-local load, and a `getpid` is made only between a `vfork`
//!   and the parent's next hook.
//! - a thread that called `unshare(CLONE_FILES)`, or `close_range` with
//!   `CLOSE_RANGE_UNSHARE`, has a table of its own for good, and so do
//!   the threads it creates afterwards (which munmapq does not see made).
//!   So from then on no thread of the process is trusted to use the table
//!   the records describe: a process-wide flag, set before the call (a
//!   call that fails costs the process munmapq's per-descriptor records,
//!   never a wrong answer).
//!
//! The common close (`lastclose.rs`) asks none of this: it reads one byte,
//! [`lane_open`], that the calls above keep shut from a `vfork` until its
//! thread is back and for good after an unshare, and that is otherwise
//! glibc's word for a process with one thread.
//!
//! The word is an 8-byte initial-exec thread-local (`tls.rs`), as
//! `frames.rs`'s cells are. Other architectures keep no word: every thread counts as
//! using the process's table (README, Limits).

use super::tls::{tls_address, tls_object};
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering::Relaxed};
use munmapq_core::os::FdTable;

tls_object!("munmapq_table_owner", 8);

/// Some thread unshared its descriptor table (see the module's text).
static UNSHARED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// A byte that is never set: where [`LANE`] points while the common close
/// is shut.
static SHUT: AtomicU8 = AtomicU8::new(0);

/// What the common close (`lastclose.rs`) reads first: one byte, nonzero
/// only while every thread is on the process's table and the close may
/// take its lane. It points at [`SHUT`] until the library has started
/// untraced, from a thread's `vfork` (or `clone` in this memory) until
/// that thread is back, and for good once a thread unshared its table;
/// otherwise at glibc's `__libc_single_threaded` (`real::single_threaded`).
/// With one thread, only that thread marks its word and clears it, so a
/// shut lane is opened again by the one that shut it; with more, glibc's
/// byte is 0 and the lane is shut whatever this points at.
static LANE: AtomicPtr<AtomicU8> = AtomicPtr::new(&SHUT as *const AtomicU8 as *mut AtomicU8);

/// Whether the common close may take its lane: the process has one
/// thread, on the table the records describe, and nothing is traced.
#[inline(always)]
pub fn lane_open() -> bool {
    // SAFETY: `SHUT`, or the C library's byte, which lives as long as it.
    unsafe { (*LANE.load(Relaxed)).load(Relaxed) != 0 }
}

/// Once the library has started, and when the thread that shut the lane
/// is back on its table: opens it, unless every call is traced, a thread
/// unshared its table, or glibc has no such word.
pub fn open_lane() {
    if crate::trace::enabled() || UNSHARED.load(Relaxed) {
        return;
    }
    if let Some(word) = super::real::single_threaded_word() {
        LANE.store(word as *const AtomicU8 as *mut AtomicU8, Relaxed);
    }
}

fn shut_lane() {
    LANE.store(&SHUT as *const AtomicU8 as *mut AtomicU8, Relaxed);
}

/// Marks the calling thread as about to share its memory with a child
/// on a copy of its table: shuts the lane first, so that the child's
/// closes find it shut.
fn mark_child_in_this_memory() {
    shut_lane();
    word().store(getpid(), Relaxed);
}

/// The calling thread's word: 0, or the pid of the process that called
/// `vfork` on this thread.
fn word() -> &'static core::sync::atomic::AtomicUsize {
    let at = tls_address!("munmapq_table_owner");
    // SAFETY: 8 zero-initialised, aligned bytes of this thread's TLS block,
    // alive as long as the thread; an atomic because a vfork child writes
    // nothing to it but reads what its parent's thread wrote.
    unsafe { &*(at as *const core::sync::atomic::AtomicUsize) }
}

fn getpid() -> usize {
    // SAFETY: getpid takes no arguments and cannot fail.
    unsafe { super::sys::call(libc::SYS_getpid, &[]) as usize }
}

/// Whose table the calling thread uses now.
#[inline]
pub fn fd_table() -> FdTable {
    let w = word();
    match w.load(Relaxed) {
        0 => {}
        pid if pid == getpid() => {
            // The parent, back from its vfork: the child has exec'd or
            // exited, and the table is its own again.
            w.store(0, Relaxed);
            open_lane();
        }
        _ => return FdTable::VforkChild,
    }
    if UNSHARED.load(Relaxed) {
        return FdTable::Unshared;
    }
    FdTable::Own
}

/// A thread is about to get a table of its own, for good.
pub fn unsharing() {
    UNSHARED.store(true, Relaxed);
    shut_lane();
}

/// Before a `clone` whose child runs in this memory, with this thread's
/// thread-local storage, on a copy of the descriptor table: marked as
/// before a `vfork` (with `CLONE_VFORK` the parent waits, and its first
/// hook after clears the mark; without it, parent and child run at once
/// on one thread-local word, which nothing can tell apart: README,
/// Limits).
pub fn child_in_this_memory() {
    if fd_table() != FdTable::VforkChild {
        mark_child_in_this_memory();
    }
}

/// The `vfork` trampoline's first step: marks the thread (unless it is a
/// vfork child already) and answers where to jump: the real `vfork`, or
/// before `resolve` a stand-in (nothing calls vfork that early).
extern "C" fn vfork_prepare() -> usize {
    if fd_table() != FdTable::VforkChild {
        mark_child_in_this_memory();
    }
    match super::real::vfork_address() {
        0 => vfork_unresolved as *const () as usize,
        f => f,
    }
}

/// `vfork` before `resolve`: fails as if the system had no room, as vfork
/// may (EAGAIN). Not libc's `fork`: an import the loader would bind in
/// every process, for a call nothing makes.
extern "C" fn vfork_unresolved() -> libc::pid_t {
    crate::errno::set(libc::EAGAIN);
    -1
}

/// # Safety
/// As for C `vfork`: the child may only call `execve` or `_exit` (and,
/// in practice, async-signal-safe functions such as `close` and `dup2`).
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn vfork() -> libc::pid_t {
    // The stack is 8 bytes off 16 at entry; the call needs it aligned.
    // `vfork_prepare` returns before the real vfork runs, and the jump
    // leaves the caller's return address where the real one expects it.
    core::arch::naked_asm!(
        "sub rsp, 8",
        "call {prepare}",
        "add rsp, 8",
        "jmp rax",
        prepare = sym vfork_prepare,
    )
}

/// glibc's other name for `vfork` (a public version): a jump to the trampoline
/// above, which leaves the stack as the caller left it.
///
/// # Safety
/// As for C `vfork`.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn __vfork() -> libc::pid_t {
    core::arch::naked_asm!("jmp {vfork}", vfork = sym vfork)
}

/// # Safety
/// As for C `vfork` (see the x86_64 version). The jump goes through x16,
/// which a `bti c` landing pad accepts from `br`.
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn vfork() -> libc::pid_t {
    core::arch::naked_asm!(
        "stp x29, x30, [sp, #-16]!",
        "mov x29, sp",
        "bl {prepare}",
        "ldp x29, x30, [sp], #16",
        "mov x16, x0",
        "br x16",
        prepare = sym vfork_prepare,
    )
}

/// glibc's other name for `vfork` (see the x86_64 version).
///
/// # Safety
/// As for C `vfork`.
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn __vfork() -> libc::pid_t {
    core::arch::naked_asm!("b {vfork}", vfork = sym vfork)
}
