//! What each hooked call does, independent of how it was hooked.
//!
//! The export layer (`interpose/`) turns C calls into calls on an [`Engine`]
//! with an [`Os`] that reaches the real functions; the unit tests use a fake
//! address space instead. Nothing here allocates, panics on purpose, blocks or
//! prints: the table is taken with `try_lock`, and a call that finds it taken
//! goes straight to the kernel (see [`crate::dirty`]).

use crate::config::{Config, Evict};
use crate::dirty::{Dirty, DirtyRanges};
use crate::holder::{TableGuard, TableLock, Taken};
use crate::sizing::Sizing;
use crate::stats::{Counter, Stats};
use crate::table::{Entry, FileKey, Lookup, State, Table};
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::*};

// The engine's calls are made in these terms (see `crate::os`).
pub use crate::os::{Errno, Os};

/// What a call does to the mappings in a range of addresses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Effect {
    /// Needs the range to look as the program left it, changes nothing
    /// (msync, mincore, munlock, mprotect to `PROT_READ`,
    /// `MAP_FIXED_NOREPLACE`, an address hint): queued mappings there are
    /// really unmapped first.
    Inspect,
    /// Changes the mappings (munmap, `MAP_FIXED`, mprotect, madvise, mlock,
    /// mremap): queued mappings there are unmapped first and live ones stop
    /// being tracked (they are no longer clean read-only views of a file).
    Modify,
}

/// A range a call is about to act on.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub effect: Effect,
}

fn evict_code(e: Evict) -> u8 {
    match e {
        Evict::Oldest => 0,
        Evict::Aged => 1,
        Evict::All => 2,
    }
}

/// With [`Evict::Aged`], eviction munmaps are budgeted at one per this many
/// deferred munmaps (1.6%: the bound is 2%), at least one per flush.
const DEFERRED_PER_EVICTION_MUNMAP: u64 = 64;

const OFF: u8 = 0;
const ACTIVE: u8 = 1;

pub struct Engine {
    table: TableLock,
    dirty: DirtyRanges,
    pub stats: Stats,
    state: AtomicU8,
    page: AtomicUsize,
    sizing: Sizing,
    reuse: AtomicBool,
    /// [`Evict`] as a number (see `evict_code`).
    evict: AtomicU8,
    /// mlockall(MCL_FUTURE) is in force: nothing new is deferred.
    locked_future: AtomicBool,
    /// The count cap still has to follow `vm.max_map_count`.
    map_count_pending: AtomicBool,
    /// Every table entry lies in `[tracked_lo, tracked_hi)` (see
    /// [`Engine::untracked`]).
    tracked_lo: AtomicUsize,
    tracked_hi: AtomicUsize,
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
            sizing: Sizing::new(),
            reuse: AtomicBool::new(false),
            evict: AtomicU8::new(0),
            locked_future: AtomicBool::new(false),
            map_count_pending: AtomicBool::new(false),
            tracked_lo: AtomicUsize::new(0),
            tracked_hi: AtomicUsize::new(0),
        }
    }

    /// Applies a configuration; with `cfg.enabled` the hooks start working.
    /// `page` must be a power of two.
    pub fn start(&self, cfg: &Config, page: usize) {
        self.page.store(page, Relaxed);
        self.sizing.start(cfg);
        self.reuse.store(cfg.reuse, Relaxed);
        self.evict.store(evict_code(cfg.evict), Relaxed);
        self.state
            .store(if cfg.enabled { ACTIVE } else { OFF }, Release);
    }

    /// The count cap was configured without `vm.max_map_count` (reading it
    /// costs every process at load, and most never queue anything): lower
    /// it as [`Config::defaults`] would, from [`Os::max_map_count`], just
    /// before the first mapping is queued. Until then nothing is queued, so
    /// nothing can count against the limit.
    pub fn bound_entries_later(&self) {
        self.map_count_pending.store(true, Relaxed);
    }

    /// Applies a pending `vm.max_map_count` bound (under the lock).
    fn bound_entries<O: Os>(&self, os: &O) {
        if !self.map_count_pending.load(Relaxed) {
            return;
        }
        self.map_count_pending.store(false, Relaxed);
        if let Some(n) = os.max_map_count() {
            let bound = Config::defaults(crate::config::System {
                max_map_count: Some(n),
                address_space_limit: None,
            })
            .max_entries;
            self.sizing.bound_by_map_count(n, bound);
        }
    }

    #[inline]
    pub fn active(&self) -> bool {
        self.state.load(Acquire) == ACTIVE
    }

    #[inline]
    fn page(&self) -> usize {
        match self.page.load(Relaxed) {
            0 => 4096,
            p => p,
        }
    }

    /// The pages `[addr, addr + len)` covers, if it is a range at all.
    #[inline]
    pub fn span(&self, addr: usize, len: usize, effect: Effect) -> Option<Span> {
        let page = self.page();
        let start = addr & !(page - 1);
        let end = round_up(addr.checked_add(len)?, page)?;
        (end > start).then_some(Span { start, end, effect })
    }

    #[allow(clippy::too_many_arguments)] // mirrors C mmap(2)
    pub fn mmap<O: Os>(
        &self,
        os: &O,
        addr: usize,
        len: usize,
        prot: i32,
        flags: i32,
        fd: i32,
        off: i64,
    ) -> Result<usize, Errno> {
        if !self.active() {
            return os.mmap(addr, len, prot, flags, fd, off);
        }
        self.stats.bump(Counter::MmapCalls);
        let fixed = flags & libc::MAP_FIXED != 0;
        if addr != 0 {
            let effect = if fixed {
                Effect::Modify
            } else {
                Effect::Inspect
            };
            if let Some(span) = self.span(addr, len, effect) {
                self.prepare(os, span);
            }
        }
        let page = self.page();
        if addr == 0
            && prot == libc::PROT_READ
            && flags == libc::MAP_PRIVATE
            && fd >= 0
            && len > 0
            && off >= 0
            && (off as u64).is_multiple_of(page as u64)
        {
            if let (Some(rlen), Some(file)) = (round_up(len, page), os.readable_file(fd)) {
                self.stats.bump(Counter::Eligible);
                let key = FileKey {
                    dev: file.dev,
                    ino: file.ino,
                    off: off as u64,
                    len: rlen,
                    stamp: file.stamp,
                };
                return self.map_eligible(os, key, len, fd, off);
            }
        }
        self.stats.bump(Counter::PassIneligible);
        self.stats.bump(Counter::MmapSyscalls);
        let r = self.retry_enomem(os, || os.mmap(addr, len, prot, flags, fd, off));
        if let (Ok(start), false) = (r, fixed) {
            self.placed_by_kernel(os, start, len);
        }
        r
    }

    /// The kernel handed out `[start, start + len)` to a call that let it
    /// choose (mmap without `MAP_FIXED`, shmat without an address), so
    /// anything we had there was unmapped behind our back: forget it.
    pub fn placed_by_kernel<O: Os>(&self, os: &O, start: usize, len: usize) {
        if !self.active() {
            return;
        }
        if let Some(s) = self.span(start, len, Effect::Modify) {
            if !self.untracked(s.start, s.end) {
                if let Some(mut t) = self.lock(os) {
                    self.forget(&mut t, s.start, s.end, u64::MAX, false);
                    self.publish_bounds(&t);
                }
            }
        }
    }

    fn map_eligible<O: Os>(
        &self,
        os: &O,
        key: FileKey,
        len: usize,
        fd: i32,
        off: i64,
    ) -> Result<usize, Errno> {
        if self.reuse.load(Relaxed) {
            if let Some(mut t) = self.lock(os) {
                loop {
                    match t.take_queued(&key) {
                        Lookup::Hit(start) => {
                            self.stats.bump(Counter::Reused);
                            return Ok(start);
                        }
                        // The file changed since that mapping was made: it
                        // may show the old contents (see `FileStamp`).
                        Lookup::Stale(e) => self.unmap_queued(os, &mut t, e, Counter::Stale),
                        Lookup::Miss => break,
                    }
                }
            }
        }
        self.stats.bump(Counter::MmapSyscalls);
        let start = self.retry_enomem(os, || {
            os.mmap(0, len, libc::PROT_READ, libc::MAP_PRIVATE, fd, off)
        })?;
        let Some(mut t) = self.lock(os) else {
            self.stats.bump(Counter::PassContention);
            return Ok(start);
        };
        self.forget(&mut t, start, start + key.len, u64::MAX, false);
        if t.is_full() && t.mark_oldest() {
            self.flush_marked(os, &mut t);
        }
        self.widen_bounds(&t, start, start + key.len);
        if !t.insert_live(start, key.len, key, self.dirty.epoch()) {
            self.stats.bump(Counter::PassTableFull);
        }
        Ok(start)
    }

    pub fn munmap<O: Os>(&self, os: &O, addr: usize, len: usize) -> Result<(), Errno> {
        if !self.active() {
            return os.munmap(addr, len);
        }
        self.stats.bump(Counter::MunmapCalls);
        // Each munmap is counted once: deferred, or passed through as not
        // queueable, untracked, or for contention.
        let passed = match self
            .span(addr, len, Effect::Modify)
            .filter(|s| s.start == addr)
        {
            Some(s) if !self.untracked(s.start, s.end) => match self.lock(os) {
                Some(mut t) => match self.try_defer(os, &mut t, s) {
                    Ok(()) => return Ok(()),
                    Err(why) => {
                        self.release(os, &mut t, s);
                        self.publish_bounds(&t);
                        why
                    }
                },
                None => {
                    self.dirty.record(s.start, s.end);
                    Counter::PassContention
                }
            },
            _ => Counter::PassUntracked,
        };
        self.stats.bump(passed);
        self.stats.bump(Counter::MunmapSyscalls);
        self.retry_enomem(os, || os.munmap(addr, len))
    }

    /// Queues the live mapping that is exactly `s`, if it may be; else
    /// answers the counter that says why not.
    fn try_defer<O: Os>(&self, os: &O, t: &mut Table, s: Span) -> Result<(), Counter> {
        let e = match t.find(s.start) {
            Some(e) if e.state == State::Live && e.end() == s.end => e,
            _ => return Err(Counter::PassUntracked),
        };
        if self.locked_future.load(Relaxed) {
            return Err(Counter::PassNotQueued);
        }
        self.bound_entries(os);
        if !self.make_room(os, t, e.len) {
            return Err(Counter::PassNotQueued);
        }
        t.enqueue(e.slot);
        self.sizing.note_queued(e.len);
        self.stats.bump(Counter::Deferred);
        self.stats.peak(Counter::PeakQueued, t.queued() as u64);
        self.stats
            .peak(Counter::PeakQueuedBytes, t.queued_bytes() as u64);
        Ok(())
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
        end <= self.tracked_lo.load(Acquire) || start >= self.tracked_hi.load(Acquire)
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

    /// Any other call acting on address ranges (mprotect, madvise, mlock,
    /// msync, mincore, mremap, ...): makes the ranges look as the program
    /// left them, then makes the call, retrying once after a full flush if
    /// it fails with ENOMEM.
    pub fn range_call<O: Os, T>(
        &self,
        os: &O,
        spans: &[Option<Span>],
        mut call: impl FnMut() -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        if !self.active() {
            return call();
        }
        self.stats.bump(Counter::OtherCalls);
        for s in spans.iter().flatten() {
            self.prepare(os, *s);
        }
        self.retry_enomem(os, call)
    }

    /// mlockall: queued mappings would be locked (and count against
    /// RLIMIT_MEMLOCK) and live ones become locked, so flush and forget
    /// everything first; with `future`, defer nothing until munlockall.
    /// What is in force afterwards follows the real call's result: XNU's
    /// mlockall always fails with ENOSYS (xnu `bsd/kern/kern_mman.c`), and
    /// a failed call locks nothing, so the earlier state comes back (a
    /// failed call costs the queue, nothing else). A successful one without
    /// `MCL_FUTURE` ends an earlier `MCL_FUTURE` (Linux `mm/mlock.c`
    /// `apply_mlockall_flags` clears the default lock flags first).
    pub fn lock_all<O: Os, T>(
        &self,
        os: &O,
        future: bool,
        mut call: impl FnMut() -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        if self.active() {
            self.stats.bump(Counter::OtherCalls);
            // Set during the call, so that no munmap racing with it is
            // queued (and then locked).
            let before = self.locked_future.load(Relaxed);
            self.locked_future.store(before || future, Relaxed);
            match self.lock(os) {
                Some(mut t) => {
                    t.mark_all();
                    self.flush_marked(os, &mut t);
                    self.stats.add(Counter::Forgotten, t.len() as u64);
                    t.clear();
                }
                None => self.dirty.record(0, usize::MAX),
            }
            let r = self.retry_enomem(os, call);
            self.locked_future
                .store(if r.is_ok() { future } else { before }, Relaxed);
            return r;
        }
        call()
    }

    /// munlockall: deferring may resume once the real call has succeeded
    /// (on XNU it always fails with ENOSYS, and then nothing was locked by
    /// mlockall either).
    pub fn unlock_all<T>(&self, call: impl FnOnce() -> Result<T, Errno>) -> Result<T, Errno> {
        let r = call();
        if r.is_ok() {
            self.locked_future.store(false, Relaxed);
        }
        r
    }

    /// In a child after `fork`: only the forking thread survives, so a lock
    /// held by another thread would never be released. Such a child forgets
    /// the table (its queued mappings stay mapped until it exits or execs).
    /// Counters restart so parent and child each report their own calls.
    pub fn after_fork_in_child<O: Os>(&self, os: &O) {
        // A holder that is this very thread (fork from a signal handler that
        // interrupted a hook) carries on in the child: leave it be.
        if self.table.held_elsewhere(os) {
            // SAFETY: the holder was another thread of the parent; it does
            // not exist in this child, so nobody else uses the table.
            unsafe { self.table.force_unlock() };
            if let Taken::Got(mut t) = self.table.try_lock(os) {
                t.clear();
            }
        }
        self.dirty.reset_after_fork();
        self.sizing.reset_after_fork();
        self.stats.reset();
    }

    /// The one way in to the table: takes it without waiting (None if it is
    /// busy) and applies what calls that found it busy recorded. A table
    /// held by a hook of this thread that a longjmp left is recovered first.
    fn lock<O: Os>(&self, os: &O) -> Option<TableGuard<'_>> {
        let mut t = match self.table.try_lock(os) {
            Taken::Got(t) => t,
            Taken::Busy => return None,
            Taken::Abandoned => {
                // SAFETY: `try_lock` just answered `Abandoned`.
                let mut t = unsafe { self.table.take_over(os) };
                self.recover_abandoned(os, &mut t);
                t
            }
        };
        self.drain(&mut t);
        Some(t)
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
    /// table busy recorded a change (the range may be someone else's now:
    /// that mapping is left mapped); everything else is forgotten.
    fn recover_abandoned<O: Os>(&self, os: &O, t: &mut Table) {
        self.stats.bump(Counter::Recovered);
        t.take_each_unmappable_slot(|start, len| {
            if self.dirty.pending_overlaps(start, start + len) {
                self.stats.bump(Counter::ForgottenQueued);
            } else {
                let _ = os.munmap(start, len);
                self.stats.bump(Counter::Released);
                self.stats.bump(Counter::MunmapSyscalls);
            }
        });
        t.clear();
        self.publish_bounds(t);
    }

    /// Releases what the program no longer has in `span`, as `span.effect`
    /// says; if the table is busy, records a modifying span for its holder.
    fn prepare<O: Os>(&self, os: &O, span: Span) {
        if self.untracked(span.start, span.end) {
            return;
        }
        match self.lock(os) {
            Some(mut t) => {
                self.release(os, &mut t, span);
                self.publish_bounds(&t);
            }
            None => {
                self.stats.bump(Counter::PassContention);
                if span.effect == Effect::Modify {
                    self.dirty.record(span.start, span.end);
                }
            }
        }
    }

    fn release<O: Os>(&self, os: &O, t: &mut Table, span: Span) {
        let mut hi = span.end;
        while let Some(e) = t.last_overlap(span.start, hi) {
            hi = e.start;
            match e.state {
                State::Queued => self.unmap_queued(os, t, e, Counter::Released),
                State::Live if span.effect == Effect::Modify => t.remove(e.slot),
                _ => {}
            }
        }
    }

    /// Really unmaps one queued mapping and takes it out of the table,
    /// counting it under `why`. In flight until it is out of the table, so
    /// that a recovery (`recover_abandoned`) never unmaps it twice.
    fn unmap_queued<O: Os>(&self, os: &O, t: &mut Table, e: Entry, why: Counter) {
        t.unmap_in_flight(e.start, e.len, || {
            let _ = os.munmap(e.start, e.len);
        });
        t.remove(e.slot);
        t.land();
        self.stats.bump(why);
        self.stats.bump(Counter::MunmapSyscalls);
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
                self.stats.bump(if queued {
                    Counter::ForgottenQueued
                } else {
                    Counter::Forgotten
                });
            }
        }
    }

    /// Applies what calls that found the table busy recorded. A lost record
    /// (ring full: a lock holder was preempted while others kept calling)
    /// drops every live entry older than it: the common busy call is a
    /// munmap of the caller's own mapping. Queued entries stay: only a
    /// program acting on memory it had already unmapped could have changed
    /// them, which a multi-threaded program cannot do without racing its
    /// own threads' mmaps.
    #[inline]
    fn drain(&self, t: &mut Table) {
        self.dirty.drain(|d| match d {
            Dirty::Range(start, end, epoch) => self.forget(t, start, end, epoch, false),
            Dirty::Upto(epoch) => {
                self.stats.bump(Counter::LostRecords);
                self.forget(t, 0, usize::MAX, epoch, true)
            }
        });
    }

    /// Evicts so that one more mapping of `len` bytes fits under the caps
    /// [`crate::sizing`] sets, and answers whether it does. Over the count
    /// or length caps:
    /// - `aged` (the default): the least recently unmapped, until the queue
    ///   is at 15/16 of its caps, each unmapped together with its touching
    ///   queued neighbours that are old enough: among the oldest 7/8 of the
    ///   queued bytes, and older still where that is needed to stay within
    ///   a budget of one eviction munmap per 64 deferred munmaps. Windows
    ///   younger than that stay. Replayed on git with 16 KiB windows
    ///   (BENCHMARKS.md), real mmaps 1.00x-1.40x exact LRU's (`oldest`:
    ///   1.00x-1.49x) with eviction munmaps at most 1.6% of deferred ones.
    /// - `oldest`: the least recently unmapped, each together with every
    ///   queued mapping touching it, until the queue is at 3/4 of its caps
    ///   (on git log --raw: flush munmaps from 800 to 24).
    /// - `all`: everything, the seed's way.
    ///
    /// Over the resident budget, the queued mappings' pages are dropped
    /// (Linux); where they cannot be (macOS), the oldest quarter of the
    /// queued length goes at a time, RSS re-read after each, until the queue
    /// is under 3/4 of its budget.
    fn make_room<O: Os>(&self, os: &O, t: &mut Table, len: usize) -> bool {
        let caps = self.sizing.caps(os, t.queued(), t.queued_bytes(), len);
        let fits = |t: &Table| t.queued() < caps.entries && t.queued_bytes() + len <= caps.bytes;
        if caps.entries == 0 || len > caps.bytes {
            return false;
        }
        if fits(t) && !caps.resident_over {
            return true;
        }
        let mode = self.evict.load(Relaxed);
        let evict_all = mode == evict_code(Evict::All);
        if !fits(t) {
            let (max_n, max_b) = (caps.entries, caps.bytes);
            if evict_all {
                t.mark_all();
            } else if mode == evict_code(Evict::Aged) {
                // Only down to 15/16 of the caps: each flush frees little, so
                // young windows stay.
                let (low_n, low_b) = (max_n - max_n / 16, max_b - max_b / 16);
                let (qn, qb) = (t.queued(), t.queued_bytes());
                let bytes = qb
                    .saturating_sub(low_b)
                    .max((qb + len).saturating_sub(max_b));
                let count = (qn + 1).saturating_sub(low_n.max(1));
                t.mark_by_age(bytes, count, qb / 8 * 7, DEFERRED_PER_EVICTION_MUNMAP);
            } else {
                let (low_n, low_b) = (max_n - max_n / 4, max_b - max_b / 4);
                while (t.queued() >= low_n.max(1)
                    || t.queued_bytes() > low_b
                    || t.queued_bytes() + len > max_b)
                    && t.mark_oldest_run() > 0
                {}
            }
            self.flush_marked(os, t);
        }
        if caps.resident_over && self.drop_queued_pages(os, t) {
            self.sizing.after_eviction(os, 0, 0);
        } else if caps.resident_over {
            loop {
                let before = t.queued_bytes();
                if evict_all {
                    t.mark_all();
                } else {
                    let target = before - before / 4;
                    while t.queued_bytes() > target && t.mark_oldest_run() > 0 {}
                }
                self.flush_marked(os, t);
                let after = t.queued_bytes();
                if !self.sizing.after_eviction(os, before - after, after) {
                    break;
                }
            }
        }
        fits(t)
    }

    /// Drops the pages of every queued mapping, keeping the mappings (one
    /// madvise per run of touching ones): the queue's resident cost goes
    /// back to nothing and every reuse stays possible.
    fn drop_queued_pages<O: Os>(&self, os: &O, t: &mut Table) -> bool {
        let mut ok = true;
        t.queued_runs(|start, len| {
            ok &= os.drop_pages(start, len);
        });
        if ok {
            self.stats.bump(Counter::PagesDropped);
        }
        ok
    }

    fn flush_marked<O: Os>(&self, os: &O, t: &mut Table) {
        let n = t.evict_marked(|start, len| {
            let _ = os.munmap(start, len);
            self.stats.bump(Counter::MunmapSyscalls);
        });
        if n > 0 {
            self.stats.bump(Counter::Flushes);
            self.stats.add(Counter::Flushed, n as u64);
        }
    }

    /// Runs `call`; if it fails with ENOMEM while mappings are queued, unmaps
    /// them all and runs it once more, so the queue is never why a call fails.
    fn retry_enomem<O: Os, T>(
        &self,
        os: &O,
        mut call: impl FnMut() -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let r = call();
        if !matches!(r, Err(libc::ENOMEM)) {
            return r;
        }
        let flushed = match self.lock(os) {
            Some(mut t) if t.queued() > 0 => {
                t.mark_all();
                self.flush_marked(os, &mut t);
                true
            }
            _ => false,
        };
        if !flushed {
            return r;
        }
        self.stats.bump(Counter::EnomemRetries);
        call()
    }

    /// The byte cap in force now (it adapts where the default is used).
    pub fn byte_cap(&self) -> usize {
        self.sizing.byte_cap()
    }

    /// Queued mappings and bytes right now (None if the table is busy).
    #[cfg(test)]
    pub fn queued<O: Os>(&self, os: &O) -> Option<(usize, usize)> {
        match self.table.try_lock(os) {
            Taken::Got(t) => Some((t.queued(), t.queued_bytes())),
            _ => None,
        }
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
