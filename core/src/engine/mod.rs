//! What each hooked call does, independent of how it was hooked
//! (`calls.rs`), and the state it keeps: the [`Queue`](crate::queue::Queue)
//! behind the table lock, and what the hooks use without it (here).
//!
//! The export layer (`interpose/`) turns C calls into calls on an [`Engine`]
//! with an [`Os`] that reaches the real functions; the unit tests use a fake
//! address space instead. Nothing here allocates, panics on purpose, blocks or
//! prints: the table is taken with `try_lock`, and a call that finds it taken
//! goes straight to the kernel (see [`crate::dirty`]).

use crate::close_seq::CloseSeq;
use crate::config::Config;
use crate::context::MmapContext;
use crate::dirty::{Dirty, DirtyRanges};
use crate::fds::FdBits;
use crate::gate::{COUNTED, TRACED};
use crate::holder::{TableGuard, TableLock, Taken};
use crate::names::LostNames;
use crate::os::Os;
use crate::payoff::Payoff;
use crate::readonly_fds::ReadOnlyFds;
use crate::sizing::Sizing;
use crate::stats::{Counter, Stats};
use crate::table::{State, Table};
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::*};

/// What a call does to the mappings in a range of addresses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Effect {
    /// Needs the range to look as the program left it, changes nothing
    /// (msync, mincore, munlock, mprotect to `PROT_READ`,
    /// `MAP_FIXED_NOREPLACE`, an address hint): queued mappings there are
    /// really unmapped first.
    Inspect,
    /// Replaces or removes the mappings (munmap, `MAP_FIXED`, mremap,
    /// `SHM_REMAP`): queued mappings there are unmapped first and live ones
    /// stop being tracked. Made while the table is busy, it is recorded as
    /// a replacement: the range may be someone else's then, so what the
    /// table had there is forgotten, never unmapped (`crate::dirty`).
    Modify,
    /// Changes the mappings in place (mprotect, madvise, mlock, mseal,
    /// mbind): as [`Effect::Modify`] (live ones are no longer clean
    /// read-only views of a file), but made while the table is busy it is
    /// recorded as a change: a queued mapping there is still munmapq's,
    /// changed, and is unmapped by the table's next holder.
    Change,
}

/// A range a call is about to act on.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub effect: Effect,
}

const OFF: u8 = 0;
const ACTIVE: u8 = 1;

/// What was asked for without the table, for its next holder to apply
/// before it queues anything (bits of `Engine::pending`): the count cap
/// has to follow `vm.max_map_count`; this is a child after fork.
const BOUND_BY_MAP_COUNT: u8 = 1;
const FORKED: u8 = 2;
/// The program changed `RLIMIT_AS`: the sizing reads the room again.
const LIMIT_CHANGED: u8 = 4;

/// The engine: the [`Queue`](crate::queue::Queue) behind its lock, and what
/// the hooks read or write without it.
pub struct Engine {
    table: TableLock,
    dirty: DirtyRanges,
    pub stats: Stats,
    state: AtomicU8,
    page: AtomicUsize,
    /// Read before the lock is taken: without reuse, an eligible mmap does
    /// not take it to look for a queued mapping.
    reuse: AtomicBool,
    /// mlockall(MCL_FUTURE) is in force: nothing new is deferred. Set
    /// before mlockall takes the table, which it may find busy.
    locked_future: AtomicBool,
    /// `BOUND_BY_MAP_COUNT` and `FORKED`.
    pending: AtomicU8,
    /// Every table entry lies in `[tracked_lo, tracked_hi)` (see
    /// [`Engine::untracked`]).
    tracked_lo: AtomicUsize,
    tracked_hi: AtomicUsize,
    /// Descriptors some table entry may have been mapped through (set
    /// before the entry is inserted, cleared at their close).
    mapped_fds: FdBits,
    /// Closes that found the table busy, for its next holder.
    closed_busy: FdBits,
    closes_pending: AtomicBool,
    /// Descriptors `F_GETFL` found read-only, per file (`calls.rs`).
    read_only_fds: ReadOnlyFds,
    /// Unlinks, renames and unmounts that found the table busy, for its
    /// next holder (`names.rs`).
    lost_names: LostNames,
    /// Closes begun and returned, per descriptor: whether the answers an
    /// eligible mmap got were about one description (`calls.rs`).
    close_seq: CloseSeq,
    /// Whether an inherited seccomp filter is still to be asked about,
    /// before the engine's first system call of its own (`calls.rs`).
    filter_unknown: AtomicBool,
    /// Descriptors whose close forgot a small live mapping: the next
    /// whole-file small mapping through one passes straight (`fds.rs`).
    closes_first: FdBits,
    /// The table was taken before a fork (`process.rs`), and what its
    /// guard gives back.
    fork_kept: AtomicBool,
    fork_previous: AtomicUsize,
    /// Whether the queue pays for small mappings here (`payoff.rs`).
    payoff: Payoff,
    /// A fork child whose queue is the parent's: its first holder unmaps
    /// it (`process.rs`).
    inherited: AtomicBool,
    /// Mappings made through the hooks passing straight while the engine
    /// is engaged, since the process's mappings were last counted for
    /// them, and how many the count allows before the next (0: none was
    /// made yet, `calls.rs`'s `FIRST_RECOUNT`; see
    /// [`crate::sizing::Sizing::count_maps_now`]). Counted with a plain
    /// load and store: a lost add only delays the count.
    maps_made: AtomicUsize,
    /// [`Os::heap_way`] once asked: its start, and its end plus one (0:
    /// not asked yet).
    heap_way: [AtomicUsize; 2],
    recount_at: AtomicUsize,
    /// What the kernel takes from a call's context (mount flags,
    /// personality), part of each key (`crate::context`).
    context: MmapContext,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
fn round_up(len: usize, page: usize) -> Option<usize> {
    len.checked_add(page - 1).map(|l| l & !(page - 1))
}

impl Engine {
    pub const fn new() -> Self {
        Engine {
            table: TableLock::new(),
            dirty: DirtyRanges::new(),
            stats: Stats::new(),
            state: AtomicU8::new(OFF),
            // 0 until `start`: a new engine is all zero bytes (`.bss`).
            page: AtomicUsize::new(0),
            reuse: AtomicBool::new(false),
            locked_future: AtomicBool::new(false),
            pending: AtomicU8::new(0),
            tracked_lo: AtomicUsize::new(0),
            tracked_hi: AtomicUsize::new(0),
            mapped_fds: FdBits::new(),
            closed_busy: FdBits::new(),
            closes_pending: AtomicBool::new(false),
            read_only_fds: ReadOnlyFds::new(),
            lost_names: LostNames::new(),
            close_seq: CloseSeq::new(),
            closes_first: FdBits::new(),
            filter_unknown: AtomicBool::new(false),
            fork_kept: AtomicBool::new(false),
            fork_previous: AtomicUsize::new(0),
            maps_made: AtomicUsize::new(0),
            heap_way: [AtomicUsize::new(0), AtomicUsize::new(0)],
            recount_at: AtomicUsize::new(0),
            payoff: Payoff::new(),
            inherited: AtomicBool::new(false),
            context: MmapContext::new(),
        }
    }

    /// Applies a configuration; with `cfg.enabled` the hooks start working.
    /// `page` must be a power of two.
    pub fn start(&self, cfg: &Config, page: usize) {
        self.page.store(page, Relaxed);
        self.reuse.store(cfg.reuse, Relaxed);
        // Without reuse nothing is measured: every miss would look a loss.
        self.payoff.start(cfg.reuse && cfg.step_aside);
        // Counted until `count_quietly` says nobody reads the counters.
        self.table.gate().set_static(COUNTED, true);
        // Free: no hook takes the table before the engine is active (below).
        if let Taken::Got(mut q) = self.table.try_lock_unhooked() {
            q.start(cfg);
        }
        self.state
            .store(if cfg.enabled { ACTIVE } else { OFF }, Release);
    }

    /// A call that can change a mount's flags in place (`mount`,
    /// `mount_setattr`) returned: no mapping made before it is handed out
    /// after it (see [`crate::context`]).
    pub fn mounts_changed(&self) {
        self.context.mounts_changed();
    }

    /// A thread is about to change its personality's `READ_IMPLIES_EXEC`
    /// (see [`crate::context`]).
    pub fn personalities_split(&self) {
        self.context.personalities_split();
    }

    /// Whether an `mprotect(PROT_READ)` may make a tracked mapping
    /// executable: once threads may differ in `READ_IMPLIES_EXEC`, such a
    /// call ends tracking as any other protection does.
    #[inline]
    pub fn read_may_imply_exec(&self) -> bool {
        self.context.split()
    }

    /// Whether small mappings may pass through where reuse is too rare to
    /// pay (`payoff.rs`; on by default, `MUNMAPQ_STEP_ASIDE`). A
    /// replay of the queue's policy turns it off: every mapping then meets
    /// the queue.
    pub fn set_steps_aside(&self, on: bool) {
        self.payoff.start(on && self.reuse.load(Relaxed));
    }

    /// The count cap was configured without `vm.max_map_count` (reading it
    /// costs every process at load, and most never queue anything): lower
    /// it as [`Config::defaults`] would, from [`Os::max_map_count`], just
    /// before the first mapping is queued. Until then nothing is queued, so
    /// nothing can count against the limit.
    pub fn bound_entries_later(&self) {
        self.pending.fetch_or(BOUND_BY_MAP_COUNT, Relaxed);
    }

    /// Applies what was asked for without the table (see `pending`), under
    /// the lock, before anything is queued.
    fn apply_pending<O: Os>(&self, os: &O, sizing: &mut Sizing) {
        if self.pending.load(Relaxed) == 0 {
            return;
        }
        let pending = self.pending.swap(0, Relaxed);
        if pending & FORKED != 0 {
            sizing.reset_after_fork();
        }
        if pending & LIMIT_CHANGED != 0 {
            sizing.limit_changed();
        }
        if pending & BOUND_BY_MAP_COUNT != 0 {
            if let Some(n) = os.max_map_count() {
                let bound = Config::defaults(crate::config::System {
                    max_map_count: Some(n),
                    address_space_limit: None,
                })
                .max_entries;
                sizing.bound_by_map_count(n, bound);
            }
        }
    }

    /// No report will be written (no `MUNMAPQ_STATS`, no statistics
    /// file): the counters are left alone from now on. Each add is an
    /// atomic instruction, the dearest of a call passing through, and a
    /// counted call cannot take the hook's plain way.
    pub fn count_quietly(&self) {
        self.table.gate().set_static(COUNTED, false);
    }

    /// Every call is written to a trace: none takes the hook's plain way,
    /// which writes nothing.
    pub fn trace_every_call(&self) {
        self.table.gate().set_static(TRACED, true);
    }

    /// Whether the hook may take the plain way of an mmap or munmap at all
    /// (see [`crate::gate`]): nothing queued, traced or counted (for the
    /// last, see [`Engine::gate_counts_only`]).
    #[inline(always)]
    pub fn gate_open(&self) -> bool {
        self.table.gate().open()
    }

    /// Whether the gate is closed only because the counters are read: the
    /// plain ways are still open, each call counted.
    #[inline(always)]
    pub fn gate_counts_only(&self) -> bool {
        self.table.gate().is(COUNTED)
    }

    #[inline(always)]
    fn counted(&self) -> bool {
        self.table.gate().has(COUNTED)
    }

    #[inline]
    fn count(&self, c: Counter) {
        self.count_n(c, 1);
    }

    #[inline]
    fn count_n(&self, c: Counter, n: u64) {
        if self.counted() {
            self.stats.add(c, n);
        }
    }

    #[inline]
    fn count_straight(&self, how: crate::stats::Straight) {
        if self.counted() {
            self.stats.straight(how);
        }
    }

    #[inline]
    pub fn active(&self) -> bool {
        self.state.load(Acquire) == ACTIVE
    }

    #[inline]
    fn page(&self) -> usize {
        // Not started: every call passes through (no span is acted on), so
        // no page size is assumed; `start` stores the system's.
        self.page.load(Relaxed).max(1)
    }

    /// The pages `[addr, addr + len)` covers, if it is a range at all.
    #[inline]
    pub fn span(&self, addr: usize, len: usize, effect: Effect) -> Option<Span> {
        let page = self.page();
        let start = addr & !(page - 1);
        let end = round_up(addr.checked_add(len)?, page)?;
        (end > start).then_some(Span { start, end, effect })
    }

    /// True when no table entry can overlap `[start, end)`, decided without
    /// the lock (for the calls that can never concern the queue: anonymous
    /// memory, other libraries' mappings).
    ///
    /// `[tracked_lo, tracked_hi)` covers every entry, live or queued, at
    /// every instant: it is widened *before* an entry is inserted and
    /// narrowed only to the exact extent of the table, both under the lock
    /// (entries are added and removed only there), one bound at a time,
    /// each store keeping it valid for every entry that exists. Each half
    /// of the test reads one bound once, so the answer was true at the
    /// instant of that read: an entry that overlaps the range later was
    /// inserted later, with a later epoch (crate::dirty), exactly as if this
    /// call had taken the lock first and found nothing. That is why nothing
    /// need be recorded for a call decided here. The range a program
    /// unmaps or changes is one it was given before the call, so its entry
    /// (if any) was inserted, and the bound widened, before that mmap
    /// returned: Release/Acquire make the widening visible to any thread
    /// the program told about the address. All zero (the initial state)
    /// is the empty bound.
    #[inline]
    fn untracked(&self, start: usize, end: usize) -> bool {
        start >= self.tracked_hi.load(Acquire) || end <= self.tracked_lo.load(Acquire)
    }

    /// Widens the tracked bound to cover `[start, end)`; before the entry
    /// is inserted, under the lock.
    fn widen_bounds(&self, t: &Table, start: usize, end: usize) {
        if t.is_empty() {
            // Empty: any bound is valid; lo first, then hi.
            self.tracked_lo.store(start, Release);
            self.tracked_hi.store(end, Release);
            return;
        }
        if start < self.tracked_lo.load(Relaxed) {
            self.tracked_lo.store(start, Release);
        }
        if end > self.tracked_hi.load(Relaxed) {
            self.tracked_hi.store(end, Release);
        }
    }

    /// Narrows the tracked bound to the table's exact extent, under the
    /// lock, after entries were removed (elsewhere the bound may stay wider
    /// than the table: only a cost, never wrong).
    fn publish_bounds(&self, t: &Table) {
        let (lo, hi) = t.extent().unwrap_or((0, 0));
        self.tracked_lo.store(lo, Release);
        self.tracked_hi.store(hi, Release);
    }

    /// The one way in to the table: takes it without waiting (None if it is
    /// busy) and applies what calls that found it busy recorded. A table
    /// held by a hook of this thread that a longjmp left is recovered first.
    #[inline(always)]
    fn lock<O: Os>(&self, os: &O) -> Option<TableGuard<'_>> {
        let mut q = match self.table.try_lock(os) {
            Taken::Got(q) => q,
            Taken::Busy => return None,
            Taken::Abandoned => return Some(self.take_abandoned(os)),
        };
        // A swap (it reads the last setter's word, and what it recorded
        // before) only where something was recorded.
        if self.caught_behind() {
            self.catch_up(os, &mut q);
        }
        Some(q)
    }

    /// Whether something was recorded for the table's holder, cleared.
    #[inline(always)]
    fn caught_behind(&self) -> bool {
        let behind = &self.table.behind;
        behind.load(Relaxed) && behind.swap(false, AcqRel)
    }

    /// A call that found the table busy recorded something for its
    /// holder (after the record): where the holder let it go just before
    /// the mark, this call catches up itself, as that holder would have.
    fn fell_behind<O: Os>(&self, os: &O) {
        if self.table.record_behind() {
            self.catch_up_after_release(os);
        }
    }

    /// Something was recorded for the table's next holder, where nothing
    /// is to be done now (a fork child, which leaves it to its first
    /// holder).
    fn left_for_next_holder(&self) {
        self.table.behind.store(true, Release);
    }

    /// By a holder that has just let the table go where something was
    /// recorded for the next (`TableLock::set_at_release`, which the hooks
    /// give a function calling this): the table taken again, which applies
    /// it, and let go without looking again (no catching up inside another),
    /// in at most 16 rounds: records that keep coming (other threads' calls
    /// while the table is taken) wait for the next holder. No state is
    /// kept between calls, so a longjmp, a fork or a thread's end anywhere
    /// in here leaves nothing behind.
    pub fn catch_up_after_release<O: Os>(&self, os: &O) {
        for _ in 0..16 {
            if !self.table.behind_after_release() {
                return;
            }
            match self.lock(os) {
                Some(q) => q.release_quietly(),
                None => return,
            }
        }
    }

    /// Has every holder catch up once it let the table go (see
    /// [`Engine::catch_up_after_release`]).
    pub fn set_at_release(&self, f: crate::holder::AtRelease) {
        self.table.set_at_release(f);
    }

    /// The table, from a holder a longjmp left (see [`Taken::Abandoned`]).
    #[cold]
    #[inline(never)]
    fn take_abandoned<O: Os>(&self, os: &O) -> TableGuard<'_> {
        // SAFETY: `try_lock` just answered `Abandoned`.
        let mut q = unsafe { self.table.take_over(os) };
        self.recover_abandoned(os, &mut q.table);
        self.catch_up(os, &mut q);
        q
    }

    /// What was asked for while the table was busy, by its new holder: a
    /// fork child's inherited queue, the ranges and closes of calls that
    /// found it taken, names lost meanwhile. Given the queue, not its
    /// guard: a guard whose address no call takes stays in registers.
    #[inline(never)]
    fn catch_up<O: Os>(&self, os: &O, q: &mut crate::queue::Queue) {
        if self.inherited.load(Relaxed) {
            self.release_inherited(os, q);
        }
        self.drain(os, &mut q.table);
        self.apply_closes(os, &mut q.table);
        if self.lost_names.pending() {
            self.apply_names(os, q);
        }
    }

    /// The table's holder was left by a longjmp in the middle of changing
    /// it: no index in it can be trusted, only each slot's own state. A slot
    /// still `Queued` or `Evicting` is a mapping the program gave up and
    /// nobody else has, unless it is in the one unmap that was in flight
    /// (done or not: it stays mapped): a reuse moves its slot out of
    /// `Queued` before handing the address out, and an eviction or release
    /// frees the slots only after their unmap returned. So those are
    /// unmapped (each freed first, so that a recovery interrupted the same
    /// way never unmaps one twice), except where a call that found the
    /// table busy recorded a replacement, or any record was lost (the
    /// range may be someone else's now: that mapping is left mapped);
    /// everything else is forgotten.
    fn recover_abandoned<O: Os>(&self, os: &O, t: &mut Table) {
        self.count(Counter::Recovered);
        t.take_each_unmappable_slot(|start, len| {
            if self.dirty.replaced_or_lost(start, start + len) {
                self.count(Counter::ForgottenQueued);
            } else {
                let _ = os.munmap(start, len);
                self.count(Counter::Released);
                self.count(Counter::MunmapSyscalls);
            }
        });
        t.clear();
        self.publish_bounds(t);
    }

    /// Drops entries overlapping `[start, end)` inserted at or before
    /// `epoch` (only live ones with `live_only`), without unmapping them.
    fn forget(&self, t: &mut Table, start: usize, end: usize, epoch: u64, live_only: bool) {
        let mut hi = end;
        while let Some(e) = t.last_overlap(start, hi) {
            hi = e.start;
            let queued = e.state == State::Queued;
            if e.epoch <= epoch && !(queued && live_only) {
                t.remove(e.slot);
                self.count(if queued {
                    Counter::ForgottenQueued
                } else {
                    Counter::Forgotten
                });
            }
        }
    }

    /// What a call recorded over `[start, end)` while the table was busy:
    /// the entries there inserted at or before `epoch` stop being tracked,
    /// and the queued ones, still munmapq's, are unmapped but for the parts
    /// a replacement recorded covers ([`crate::queue::Books::unmap`]; this
    /// record, if it is one, until the drain frees it). A replacement
    /// counts as released only a window it left wholly munmapq's; a change
    /// in place leaves every window munmapq's.
    ///
    /// A queued window inserted at or before `lost`, the epoch of a loss
    /// not answered yet, is left to that answer (`lost.rs`, which asks
    /// the kernel whether a lost call replaced it).
    fn release_recorded<O: Os>(
        &self,
        os: &O,
        t: &mut Table,
        (start, end, epoch): (usize, usize, u64),
        replaced: bool,
        lost: Option<u64>,
    ) {
        let mut hi = end;
        while let Some(e) = t.last_overlap(start, hi) {
            hi = e.start;
            if e.epoch > epoch {
                continue;
            }
            if e.state != State::Queued {
                t.remove(e.slot);
                self.count(Counter::Forgotten);
            } else if lost.is_some_and(|l| e.epoch <= l) {
                // The answer's.
            } else if !replaced {
                self.unmap_queued(os, t, e, Counter::Released);
            } else {
                let mut left = false;
                t.unmap_in_flight(e.start, e.len, || {
                    left = self.books().unmap(os, e.start, e.len);
                });
                t.remove(e.slot);
                t.finish_unmap();
                if !left {
                    self.count(Counter::Released);
                }
            }
        }
    }

    /// Applies what calls that found the table busy recorded (a lost
    /// record: `lost.rs`). The ring is full when a record is lost: the
    /// records beside the loss are applied, and their slots freed, before
    /// it is answered. Answered with the ring still full, every call
    /// another thread made while the holder read the mappings was lost
    /// too and cut the read short, until the holder trusted no queued
    /// window and left them all mapped for good (a fork child then found
    /// the window its parent had unmapped: `tests/sandbox.rs`).
    #[inline]
    fn drain<O: Os>(&self, os: &O, t: &mut Table) {
        let Some(epoch) = self.dirty.loss() else {
            self.apply_records(os, t, None);
            return;
        };
        self.apply_records(os, t, Some(epoch));
        self.records_lost(os, t, epoch);
        // What the answer needed kept, and what was recorded meanwhile.
        self.apply_records(os, t, None);
    }

    /// Applies the complete records and frees their slots. Where a loss
    /// of epoch `lost` is not answered yet, a queued window inserted at or
    /// before it is the answer's (`lost.rs`, which asks the kernel): a
    /// change recorded there is applied to the rest only, and a
    /// replacement recorded there is kept in the ring, where it keeps the
    /// answer's unmap off its range, to be applied after the answer.
    fn apply_records<O: Os>(&self, os: &O, t: &mut Table, lost: Option<u64>) {
        self.dirty.drain_records(|d| match d {
            Dirty::Range(start, end, epoch) => {
                // Whatever its own epoch: one numbered before the window
                // was mapped may reach the kernel only after the answer's
                // read, and is kept to keep its unmap off the range.
                if lost.is_some_and(|upto| t.queued_overlaps(start, end, upto)) {
                    return false;
                }
                self.release_recorded(os, t, (start, end, epoch), true, None);
                true
            }
            Dirty::Changed(start, end, epoch) => {
                self.release_recorded(os, t, (start, end, epoch), false, lost);
                true
            }
            // Never handed by `drain_records`: the loss is `drain`'s.
            Dirty::Upto(_) => true,
        });
    }

    /// What the table's holder reports to and checks against.
    fn books(&self) -> crate::queue::Books<'_> {
        self.books_counting(self.counted())
    }

    /// [`Engine::books`], whether the counters are read told by a caller
    /// that read it already ([`Engine::counted`]).
    #[inline(always)]
    fn books_counting(&self, counted: bool) -> crate::queue::Books<'_> {
        crate::queue::Books {
            stats: counted.then_some(&self.stats),
            dirty: &self.dirty,
        }
    }

    /// The byte cap in force now (it adapts where the default is used;
    /// None if the table is busy). Only where no hook runs (see
    /// [`TableLock::try_lock_unhooked`]).
    pub fn byte_cap(&self) -> Option<usize> {
        match self.table.try_lock_unhooked() {
            Taken::Got(q) => Some(q.sizing.byte_cap()),
            _ => None,
        }
    }

    /// Queued mappings and bytes right now (None if the table is busy).
    #[cfg(test)]
    pub fn queued<O: Os>(&self, os: &O) -> Option<(usize, usize)> {
        match self.table.try_lock(os) {
            Taken::Got(q) => Some((q.table.queued(), q.table.queued_bytes())),
            _ => None,
        }
    }
}

mod calls;
mod fds;
mod lost;
mod names;
pub use calls::MmapWay;
pub use fds::Closing;
mod process;
#[cfg(test)]
mod tests;
