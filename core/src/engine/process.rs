//! What the process does around the queue: fork, a seccomp filter, a
//! lower `RLIMIT_AS` (and an unmount, `fds.rs`). Each is rare, so each may wait a bounded while for
//! the table (never a hook's common path, which only ever tries once).

use super::{Engine, ACTIVE, FORKED, LIMIT_CHANGED, OFF};
use crate::os::Os;
use core::sync::atomic::Ordering::*;

/// A bounded wait for the table first tries it with [`Os::pause`] between
/// tries, at most this many times and for at most [`YIELD_US`]: holders
/// keep it for microseconds (a flush of a full table, a few milliseconds).
/// A yield hands the processor to any other thread that wants it for as
/// long as the scheduler lets it, so with a busy thread beside, 2000 of
/// them took seconds.
const TRIES: usize = 2000;
const YIELD_US: u64 = 2_000;
/// Then with [`Os::nap`] between tries (100 µs asked on Linux, about 170
/// with the timer's slack), up to [`WAIT_US`] in all: the library's own
/// longest holds, not stopped, last tens of milliseconds (unmapping a
/// queued window of 256 MiB took 16 ms here, reading the maps of 60,000
/// mappings 32 ms). Only a holder that is stopped or dead keeps the table
/// past it. Without a clock ([`Os::monotonic_us`] answering 0), the counts
/// alone bound it.
const NAPS: usize = 2000;
const WAIT_US: u64 = 250_000;

impl Engine {
    /// Takes the table, waiting a bounded while (None if it stays busy, or
    /// this thread holds it: a signal handler nested in a hook).
    pub(super) fn lock_patiently<O: Os>(&self, os: &O) -> Option<crate::holder::TableGuard<'_>> {
        let start = os.monotonic_us();
        let mut yields = 0;
        for _ in 0..TRIES + NAPS {
            if self.table.held_here(os) {
                return None;
            }
            if let Some(q) = self.lock(os) {
                return Some(q);
            }
            let waited = os.monotonic_us().saturating_sub(start);
            if waited >= WAIT_US {
                return None;
            }
            if yields < TRIES && waited < YIELD_US {
                yields += 1;
                os.pause();
            } else {
                os.nap();
            }
        }
        None
    }

    /// A seccomp filter is about to be installed (it may kill the process
    /// on any system call munmapq makes, and cannot be removed), or the
    /// program maps a region that grows down: every queued mapping is
    /// unmapped now and every later call passes straight through, whether
    /// the filter is installed (the region mapped) or not.
    pub fn stop_for_good<O: Os>(&self, os: &O) {
        if self.state.swap(OFF, AcqRel) != ACTIVE {
            return;
        }
        if let Some(mut q) = self.lock_patiently(os) {
            q.flush_all(os, self.books());
            q.table.clear();
            self.publish_bounds(&q.table);
        }
    }

    /// The loader started the engine without asking whether the process
    /// inherited a seccomp filter (a system call every process would pay
    /// for at load): it is asked before the engine's first system call of
    /// its own, the first mmap the engine takes up ([`Os::inherited_filter`]).
    /// Every other call of its own follows one: a tracked range, a
    /// descriptor mapped through, a queue to size.
    pub fn check_filter_later(&self) {
        self.filter_unknown.store(true, Relaxed);
    }

    /// Asks what [`Self::check_filter_later`] put off: whether the engine
    /// must stop for good (then the call passes through).
    #[cold]
    pub(super) fn stopped_by_filter<O: Os>(&self, os: &O) -> bool {
        if os.inherited_filter() {
            self.stop_for_good(os);
            return true;
        }
        self.filter_unknown.store(false, Relaxed);
        false
    }

    /// The program has set `RLIMIT_AS`; `lower` when to less than it was.
    /// What is queued is unmapped when the limit fell (the C library's own
    /// mappings, which munmapq cannot retry after a flush, must find the
    /// room they would have without it), and the room is read again at
    /// the next deferral.
    pub fn address_space_limit_set<O: Os>(&self, os: &O, lower: bool) {
        if !self.active() {
            return;
        }
        self.pending.fetch_or(LIMIT_CHANGED, Relaxed);
        if lower {
            if let Some(mut q) = self.lock_patiently(os) {
                q.flush_all(os, self.books());
            }
        }
    }

    /// Before `fork` (atfork prepare): unmaps what the program gave up
    /// (see [`Self::before_copy`]), then takes the table and keeps it, so
    /// that the child gets it whole, not in the middle of another
    /// thread's change. Not if this thread holds it (a fork from a signal
    /// handler that interrupted a hook), nor past a bounded wait.
    pub fn before_fork<O: Os>(&self, os: &O) {
        // A parent back from a vfork forgets the mark it left for the
        // child (see `Os::fd_table`): the fork child, its own process,
        // must not take itself for a vfork child.
        let _ = os.fd_table();
        if !self.active() {
            return;
        }
        if let Some(mut q) = self.lock_patiently(os) {
            self.give_up_queue(os, &mut q);
            self.fork_previous.store(q.keep(), Relaxed);
            self.fork_kept.store(true, Relaxed);
        }
    }

    /// Before a child that gets a copy of this memory and that no atfork
    /// handler hears of (glibc's `_Fork`, `clone` without `CLONE_VM`, a
    /// fork through `syscall`): unmaps what the program gave up, as
    /// [`Self::before_fork`] does. The table is not kept across the call
    /// (a `clone` child runs a function and never returns through the
    /// hook to give it back): what another thread queues meanwhile is
    /// copied, and released by the child as it would be without this.
    pub fn before_copy<O: Os>(&self, os: &O) {
        // As before a fork: the copy must not take itself for a vfork child.
        let _ = os.fd_table();
        if !self.active() {
            return;
        }
        if let Some(mut q) = self.lock_patiently(os) {
            self.give_up_queue(os, &mut q);
        }
    }

    /// Unmaps every queued mapping, one munmap per run of touching ones:
    /// a copy of the process (the kernel copies every mapping at a fork,
    /// then tears it down at the child's exit or exec, and copies the
    /// parent's whole list of mappings first) would otherwise pay for what
    /// the program had unmapped. A range a call that found the table busy
    /// may have made the program's again is forgotten, not unmapped (see
    /// [`crate::queue::Books::unmap`]). Live entries stay tracked.
    fn give_up_queue<O: Os>(&self, os: &O, q: &mut crate::queue::Queue) {
        if q.table.queued() > 0 {
            q.flush_all(os, self.books());
            self.publish_bounds(&q.table);
        }
    }

    /// In a fork child, at its first holder: unmaps what the parent had
    /// queued (live entries stay tracked: they are the child's mappings
    /// too). Nothing, after a fork whose prepare handler could take the
    /// table (it unmapped the queue); this is for one that could not.
    pub(super) fn release_inherited<O: Os>(&self, os: &O, q: &mut crate::queue::Queue) {
        if self.inherited.swap(false, Relaxed) {
            q.flush_all(os, self.books());
            self.publish_bounds(&q.table);
        }
    }

    /// In the parent after `fork`: gives back what [`Self::before_fork`]
    /// took.
    pub fn after_fork_in_parent<O: Os>(&self, os: &O) {
        if self.fork_kept.swap(false, Relaxed) {
            // SAFETY: this thread kept it in `before_fork`.
            unsafe { self.table.give_back(os, self.fork_previous.load(Relaxed)) };
            // As after any release: what was recorded while it was kept,
            // across the fork, is applied now.
            self.catch_up_after_release(os);
        }
    }

    /// In a child after `fork`: the table the forking thread kept across
    /// the fork is whole, and nothing is done to it now (a child that
    /// execs or exits, the common kind, would pay for nothing). The
    /// prepare handler unmapped the queue; where it could not take the
    /// table, what the parent had queued (the program had unmapped it) is
    /// unmapped by the child's first call that takes the table (every way
    /// to the table passes there first): copies that keep their files
    /// open (see `inherited`). Only the forking
    /// thread survives: a table some other thread held (the wait before
    /// the fork ran out) is taken over, trusting only each slot's own
    /// state, as after a longjmp out of a hook. A holder that is this very
    /// thread (fork from a signal handler that interrupted a hook) carries
    /// on in the child: it is left be, and the queue it leaves is
    /// released by the next holder. Counters restart so parent and child
    /// each report their own calls.
    pub fn after_fork_in_child<O: Os>(&self, os: &O) {
        if self.fork_kept.swap(false, Relaxed) {
            // SAFETY: the forking thread kept it in `before_fork`.
            unsafe { self.table.give_back(os, self.fork_previous.load(Relaxed)) };
        } else if self.table.held_elsewhere(os) {
            // SAFETY: the holder was another thread of the parent; it does
            // not exist in this child, so nobody else uses the table.
            unsafe { self.table.force_unlock() };
            // Not through `lock`: what busy calls recorded is applied
            // (by the next holder) to the table once it is recovered, not
            // to the torn one.
            if let crate::holder::Taken::Got(mut q) = self.table.try_lock(os) {
                self.recover_abandoned(os, &mut q.table);
                q.release_quietly();
            }
        }
        self.dirty.reset_after_fork();
        self.lost_names.reset_after_fork();
        // What the parent still had queued is released by the child's
        // first holder (`release_inherited`). Nothing is done now: a
        // child that execs or exits pays nothing for it.
        self.inherited.store(true, Relaxed);
        self.left_for_next_holder();
        // The sizing rule reads its memory anew: applied by the next
        // holder, since this thread may be the holder (see above).
        self.pending.fetch_or(FORKED, Relaxed);
        self.stats.reset();
    }
}
