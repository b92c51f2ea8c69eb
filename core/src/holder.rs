//! Who holds the table, so that a lock abandoned by a `siglongjmp` is
//! recognised and recovered instead of blocking munmapq for good.
//!
//! A signal handler that interrupts a hook while it holds the table and then
//! `siglongjmp`s out (a SIGALRM timeout, a shell returning to its prompt on
//! SIGINT) skips the guard's release: the lock stays taken by a frame that
//! no longer exists. Every later call would pass through, and what was
//! queued would never be released.
//!
//! The lock word therefore holds the holder's thread (the address of its
//! [`PerThread`] cells, else [`Os::this_thread`]), set by the
//! compare-and-swap that takes it: there is no instant at which the table is
//! taken by nobody in particular. Each thread keeps, in its [`PerThread`]
//! cells (thread-local, kept by the [`Os`]), its current *hook frame* (an
//! address near the top of the exported function it entered, recorded on
//! entry or, in the hooks whose common calls never take the table, on the
//! way to it: [`Os::framed`]; 0 where none is kept) and the frame at which
//! it took the table, written *before* the compare-and-swap. A call that finds the table taken by its own thread is
//! either
//! - a signal handler nested in the holder: it runs below the holder's
//!   frames, at least the kernel's signal frame lower (over 1 KiB on x86_64,
//!   over 4 KiB on arm64), or on the alternate signal stack; or
//! - a later call after the holder's frames were left by a longjmp: its own
//!   hook frame is then at or above the holder's (the jump went up the
//!   stack, and the program called again from there).
//!
//! Only the second is recovered (see `Engine::lock`); when in doubt, the call
//! passes through as before.

use crate::gate::{Gate, QUEUED};
use crate::os::{Os, PerThread, SignalStack};
use crate::queue::Queue;
use core::cell::UnsafeCell;
use core::sync::atomic::{compiler_fence, AtomicBool, AtomicUsize, Ordering::*};

/// Frames of different hooks called from one place differ by their
/// forwarders' sizes (tens of bytes); a nested signal handler is at least
/// the 128-byte red zone plus the kernel's signal frame lower.
const SAME_PLACE_SLACK: usize = 512;
/// A later call made from further up the same stack than this is taken to be
/// on another stack (a user-level context switch), not a recovery case.
const SAME_STACK_SPAN: usize = 1 << 20;

/// The calling thread's name in the lock word: the address of its cells
/// (as unique among live threads as a thread id, and already at hand), else
/// what the system calls it.
fn me<O: Os>(os: &O, cells: Option<&'static PerThread>) -> usize {
    cells.map_or_else(|| os.this_thread(), |c| c as *const PerThread as usize)
}

/// The table (with the rest of the [`Queue`]) behind a try-only lock that
/// knows its holder.
pub struct TableLock {
    /// The holder's thread (see [`me`]), 0 when free.
    owner: AtomicUsize,
    /// Its [`QUEUED`] bit is clear only while nothing is queued: set before
    /// a mapping is queued, cleared by a holder that gives the table back
    /// with nothing queued. Read without the table by the hooks' plain ways
    /// (`Engine::mmap_is_plain`, `Engine::munmap_is_plain`).
    gate: Gate,
    queue: UnsafeCell<Queue>,
    /// Something was recorded for the table's holder (a busy call's
    /// range, close or name; a fork child's inherited queue): set after
    /// the record ([`TableLock::record_behind`]), taken by the holder
    /// before it reads them (`Engine::lock`), so that a holder with
    /// nothing to catch up on reads one word.
    pub(crate) behind: AtomicBool,
    /// What a holder does after it let the table go where `behind` is set
    /// ([`AtRelease`] as a word, 0 for nothing): set once by the process's
    /// hooks.
    at_release: AtomicUsize,
}

/// The engine's catching up, by a holder that has just let the table go
/// where a call that found it busy recorded something: a signal handler's
/// close made while the hook it interrupted held the table is otherwise
/// acted on only at the next taking, which may never come before the
/// program acts on that close (asks for the lock the file held).
pub type AtRelease = fn();

// SAFETY: the table is reached only through a `TableGuard`, which exists
// only for the thread whose compare-and-swap took `owner` (or, in
// `Engine::recover_abandoned` and after fork, for the only thread that can
// still touch it).
unsafe impl Sync for TableLock {}

/// What trying to take the table found.
pub enum Taken<'a> {
    Got(TableGuard<'a>),
    /// Held by another thread, or by this one below us (a signal handler).
    Busy,
    /// Held by a hook of this thread that a longjmp has left.
    Abandoned,
}

impl Default for TableLock {
    fn default() -> Self {
        Self::new()
    }
}

impl TableLock {
    pub const fn new() -> Self {
        TableLock {
            owner: AtomicUsize::new(0),
            gate: Gate::new(),
            queue: UnsafeCell::new(Queue::new()),
            behind: AtomicBool::new(false),
            at_release: AtomicUsize::new(0),
        }
    }

    /// What every holder does once it let the table go, where a call that
    /// found it busy recorded something meanwhile.
    pub fn set_at_release(&self, f: AtRelease) {
        self.at_release.store(f as usize, Release);
    }

    /// [`AtRelease`], by a holder that has just let the table go (in its
    /// guard's drop).
    #[cold]
    #[inline(never)]
    fn after_release(&self) {
        let f = self.at_release.load(Acquire);
        if f != 0 {
            // SAFETY: the word was stored from an `AtRelease` (a plain
            // function pointer, the size of a word) by `set_at_release`.
            unsafe { core::mem::transmute::<usize, AtRelease>(f)() };
        }
    }

    /// After a call that found the table busy recorded something for its
    /// holder: marks it, and answers whether the table was free just
    /// after, so that the caller catches up itself. A holder's release
    /// (a swap of the owner word, then a look at the mark, both in the
    /// one total order of sequentially consistent operations, as the
    /// store and the load here) and this cannot both miss each other:
    /// either the release comes after the mark and sees it, or the look
    /// here comes after the release and sees the table free (or a later
    /// holder, whose release comes later still). Without it, a record
    /// made just as the holder let go waited for the next call that took
    /// the table, which may never come before the program acts on it (a
    /// close's lock asked for by another process).
    pub(crate) fn record_behind(&self) -> bool {
        self.behind.store(true, SeqCst);
        self.owner.load(SeqCst) == 0
    }

    /// Whether something was recorded for the table's holder, as a holder
    /// that has just let it go sees it (see [`TableLock::record_behind`]).
    #[inline(always)]
    pub(crate) fn behind_after_release(&self) -> bool {
        self.behind.load(SeqCst)
    }

    /// Takes the table if it is free, without waiting.
    #[inline]
    pub fn try_lock<O: Os>(&self, os: &O) -> Taken<'_> {
        let cells = os.thread_cells();
        let me = me(os, cells);
        if self.owner.load(Relaxed) == me {
            return if cells.is_some_and(|c| abandoned(os, c)) {
                Taken::Abandoned
            } else {
                Taken::Busy
            };
        }
        // The hold frame first: a handler of this thread that interrupts
        // right after the compare-and-swap must find it.
        let previous = cells.map_or(0, |c| c.hold.replace(c.frame.get()));
        compiler_fence(SeqCst);
        if self.owner.compare_exchange(0, me, Acquire, Relaxed).is_ok() {
            return Taken::Got(TableGuard {
                lock: self,
                cells,
                previous,
            });
        }
        if let Some(c) = cells {
            c.hold.set(previous);
        }
        Taken::Busy
    }

    /// Takes the table if it is free, where no hook can want it: before the
    /// engine is active, or in a program that drives the engine from one
    /// thread (`mq-replay`). The holder is named by a word no thread has, so
    /// it is never taken for an abandoned one.
    pub fn try_lock_unhooked(&self) -> Taken<'_> {
        match self.owner.compare_exchange(0, usize::MAX, Acquire, Relaxed) {
            Ok(_) => Taken::Got(TableGuard {
                lock: self,
                cells: None,
                previous: 0,
            }),
            Err(_) => Taken::Busy,
        }
    }

    /// After [`Taken::Abandoned`]: the table, whatever state the longjmp
    /// left it in, for this thread now.
    ///
    /// # Safety
    /// Only right after `try_lock` answered `Abandoned` on this thread.
    pub unsafe fn take_over<O: Os>(&self, os: &O) -> TableGuard<'_> {
        let cells = os.thread_cells();
        if let Some(c) = cells {
            c.hold.set(c.frame.get());
        }
        TableGuard {
            lock: self,
            cells,
            previous: 0,
        }
    }

    /// Whether a mapping may be queued: false means none was at the read
    /// (unless one is being queued right now, by a holder racing with the
    /// reader, as if the reader had come first).
    #[inline(always)]
    pub fn may_have_queued(&self) -> bool {
        self.gate.has(QUEUED)
    }

    /// A mapping is about to be queued, by the table's holder.
    #[inline]
    pub fn queueing(&self) {
        self.gate.holder_sets_queued(true);
    }

    /// The word the plain ways read first ([`crate::gate`]).
    #[inline(always)]
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Taken by a thread other than the calling one?
    pub fn held_elsewhere<O: Os>(&self, os: &O) -> bool {
        let me = me(os, os.thread_cells());
        let owner = self.owner.load(Relaxed);
        owner != 0 && owner != me
    }

    /// Frees the lock whoever holds it.
    ///
    /// # Safety
    /// The holder must never touch the table again (it does not exist any
    /// more, as another thread of the parent in a forked child).
    pub unsafe fn force_unlock(&self) {
        self.owner.store(0, Release);
    }

    /// Whether the calling thread holds the table (a fork from a signal
    /// handler that interrupted a hook holding it).
    pub fn held_here<O: Os>(&self, os: &O) -> bool {
        self.owner.load(Relaxed) == me(os, os.thread_cells())
    }

    /// Gives back a table kept by [`TableGuard::keep`], `previous` being
    /// what `keep` answered.
    ///
    /// # Safety
    /// The calling thread kept it (in a fork child: the forking thread).
    pub unsafe fn give_back<O: Os>(&self, os: &O, previous: usize) {
        // A swap, as any release that looks for records after it (see
        // `record_behind`).
        self.owner.swap(0, SeqCst);
        compiler_fence(SeqCst);
        if let Some(c) = os.thread_cells() {
            c.hold.set(previous);
        }
    }
}

/// The table is taken by this thread: was it taken by a hook frame that a
/// longjmp has left? (Not if it is still on the stack above us.)
fn abandoned<O: Os>(os: &O, c: &PerThread) -> bool {
    let (held, now) = (c.hold.get(), c.frame.get());
    held != 0
        && now != 0
        && now + SAME_PLACE_SLACK >= held
        && now - held.min(now) <= SAME_STACK_SPAN
        && !nested_on_signal_stack(os, held)
}

/// Is this a signal handler running on the alternate signal stack while the
/// holder's frame is on another stack? Then the holder may well be alive
/// below it, whatever the addresses say.
fn nested_on_signal_stack<O: Os>(os: &O, held: usize) -> bool {
    match os.signal_stack() {
        SignalStack::Elsewhere => false,
        SignalStack::On { base, size } => !(base..base + size).contains(&held),
        SignalStack::Unknown => true,
    }
}

/// The table, taken; gives it back when dropped.
pub struct TableGuard<'a> {
    lock: &'a TableLock,
    cells: Option<&'static PerThread>,
    /// The hold frame to put back (that of an outer attempt, or 0).
    previous: usize,
}

impl TableGuard<'_> {
    /// Keeps the table held past this guard (across a `fork`, whose
    /// handlers run in separate calls): [`TableLock::give_back`] with the
    /// value answered releases it.
    pub fn keep(self) -> usize {
        let previous = self.previous;
        core::mem::forget(self);
        previous
    }
}

impl core::ops::Deref for TableGuard<'_> {
    type Target = Queue;
    fn deref(&self) -> &Queue {
        // SAFETY: this guard is the table's only user (see `TableLock`).
        unsafe { &*self.lock.queue.get() }
    }
}

impl core::ops::DerefMut for TableGuard<'_> {
    fn deref_mut(&mut self) -> &mut Queue {
        // SAFETY: as above.
        unsafe { &mut *self.lock.queue.get() }
    }
}

impl TableGuard<'_> {
    /// Lets the table go without looking at what was recorded meanwhile:
    /// for the catching up after a release, which looks itself, and for
    /// a fork child, which leaves it to its first holder.
    pub fn release_quietly(self) {
        let mut this = core::mem::ManuallyDrop::new(self);
        this.release();
    }

    #[inline(always)]
    fn release(&mut self) {
        // SAFETY: this guard still holds the table. While anything is
        // queued the word is already set (by `queueing`).
        if unsafe { (*self.lock.queue.get()).table.queued() } == 0 {
            self.lock.gate.holder_sets_queued(false);
        }
        // A swap, not a store: ordered before the look at what was
        // recorded meanwhile (see `record_behind`).
        self.lock.owner.swap(0, SeqCst);
        compiler_fence(SeqCst);
        if let Some(c) = self.cells {
            c.hold.set(self.previous);
        }
    }
}

impl Drop for TableGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.release();
        // After the release: what was recorded while the table was held,
        // by a signal handler of this thread or by another thread, is
        // seen here, or by the recorder itself (`record_behind`).
        if self.lock.behind_after_release() {
            self.lock.after_release();
        }
    }
}
