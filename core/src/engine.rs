//! What each hooked call does, independent of how it was hooked.
//!
//! The export layer (`interpose/`) turns C calls into calls on an [`Engine`]
//! with an [`Os`] that reaches the real functions; the unit tests use a fake
//! address space instead. Nothing here allocates, panics on purpose, blocks or
//! prints: the table is taken with `try_lock`, and a call that finds it taken
//! goes straight to the kernel (see [`crate::dirty`]).

use crate::config::{Config, Evict};
use crate::dirty::{Dirty, DirtyRanges};
use crate::sizing::{Sizing, Usage};
use crate::stats::{Counter, Stats};
use crate::table::{FileKey, State, Table};
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::*};
use spin::mutex::SpinMutex;

pub type Errno = i32;

/// The real system: mmap, munmap and the file checks a reuse needs.
pub trait Os {
    #[allow(clippy::too_many_arguments)]
    fn mmap(
        &self,
        addr: usize,
        len: usize,
        prot: i32,
        flags: i32,
        fd: i32,
        off: i64,
    ) -> Result<usize, Errno>;
    fn munmap(&self, addr: usize, len: usize) -> Result<(), Errno>;
    /// Device and inode of `fd` when a `PROT_READ`, `MAP_PRIVATE` mapping of
    /// it would succeed: a regular file, open for reading (not `O_WRONLY`,
    /// not `O_PATH`). Checked on every call: fd numbers are reused.
    fn readable_file(&self, fd: i32) -> Option<(u64, u64)>;
    /// The process's address space and resident set right now (asked when
    /// the queue has grown by a step, see [`crate::sizing`]).
    fn usage(&self) -> Option<Usage>;
    /// How many mappings the process has (asked rarely: it is costly).
    fn map_count(&self) -> Option<usize>;
    /// The `RLIMIT_AS` soft limit, or `None` when unlimited.
    fn address_space_limit(&self) -> Option<usize>;
    /// Drops the resident pages of a queued range munmapq alone owns, the
    /// mapping staying in place (a later fault reads the file again, as a
    /// fresh mapping would). False where the system cannot.
    fn drop_pages(&self, addr: usize, len: usize) -> bool;
}

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

const OFF: u8 = 0;
const ACTIVE: u8 = 1;

pub struct Engine {
    table: SpinMutex<Table>,
    dirty: DirtyRanges,
    pub stats: Stats,
    state: AtomicU8,
    page: AtomicUsize,
    sizing: Sizing,
    reuse: AtomicBool,
    evict_all: AtomicBool,
    /// mlockall(MCL_FUTURE) is in force: nothing new is deferred.
    locked_future: AtomicBool,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

fn round_up(len: usize, page: usize) -> Option<usize> {
    len.checked_add(page - 1).map(|l| l & !(page - 1))
}

impl Engine {
    pub const fn new() -> Self {
        Engine {
            table: SpinMutex::new(Table::new()),
            dirty: DirtyRanges::new(),
            stats: Stats::new(),
            state: AtomicU8::new(OFF),
            page: AtomicUsize::new(4096),
            sizing: Sizing::new(),
            reuse: AtomicBool::new(false),
            evict_all: AtomicBool::new(false),
            locked_future: AtomicBool::new(false),
        }
    }

    /// Applies a configuration; with `cfg.enabled` the hooks start working.
    /// `page` must be a power of two.
    pub fn start(&self, cfg: &Config, page: usize) {
        self.page.store(page, Relaxed);
        self.sizing.start(cfg);
        self.reuse.store(cfg.reuse, Relaxed);
        self.evict_all.store(cfg.evict == Evict::All, Relaxed);
        self.state
            .store(if cfg.enabled { ACTIVE } else { OFF }, Release);
    }

    pub fn active(&self) -> bool {
        self.state.load(Acquire) == ACTIVE
    }

    fn page(&self) -> usize {
        self.page.load(Relaxed)
    }

    /// The pages `[addr, addr + len)` covers, if it is a range at all.
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
            if let (Some(rlen), Some((dev, ino))) = (round_up(len, page), os.readable_file(fd)) {
                self.stats.bump(Counter::Eligible);
                let key = FileKey {
                    dev,
                    ino,
                    off: off as u64,
                    len: rlen,
                };
                return self.map_eligible(os, key, len, fd, off);
            }
        }
        self.stats.bump(Counter::PassIneligible);
        self.stats.bump(Counter::MmapSyscalls);
        let r = self.retry_enomem(os, || os.mmap(addr, len, prot, flags, fd, off));
        if let (Ok(start), false) = (r, fixed) {
            // The kernel handed out these addresses, so anything we had
            // there was unmapped behind our back.
            if let Some(s) = self.span(start, len, Effect::Modify) {
                if let Some(mut t) = self.lock() {
                    self.forget(&mut t, s.start, s.end, u64::MAX, false);
                }
            }
        }
        r
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
            if let Some(mut t) = self.lock() {
                if let Some(start) = t.take_queued(&key) {
                    self.stats.bump(Counter::Reused);
                    return Ok(start);
                }
            }
        }
        self.stats.bump(Counter::MmapSyscalls);
        let start = self.retry_enomem(os, || {
            os.mmap(0, len, libc::PROT_READ, libc::MAP_PRIVATE, fd, off)
        })?;
        let Some(mut t) = self.lock() else {
            self.stats.bump(Counter::PassContention);
            return Ok(start);
        };
        self.forget(&mut t, start, start + key.len, u64::MAX, false);
        if t.is_full() && t.mark_oldest() {
            self.flush_marked(os, &mut t);
        }
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
        let span = self
            .span(addr, len, Effect::Modify)
            .filter(|s| s.start == addr);
        if let Some(s) = span {
            match self.lock() {
                Some(mut t) => {
                    if let Some(e) = t.find(s.start) {
                        if e.state == State::Live
                            && e.end() == s.end
                            && !self.locked_future.load(Relaxed)
                            && self.make_room(os, &mut t, e.len)
                        {
                            t.enqueue(e.slot);
                            self.sizing.note_queued(e.len);
                            self.stats.bump(Counter::Deferred);
                            self.stats.peak(Counter::PeakQueued, t.queued() as u64);
                            self.stats
                                .peak(Counter::PeakQueuedBytes, t.queued_bytes() as u64);
                            return Ok(());
                        }
                    }
                    self.release(os, &mut t, s);
                }
                None => {
                    self.stats.bump(Counter::PassContention);
                    self.dirty.record(s.start, s.end);
                }
            }
        }
        self.stats.bump(Counter::PassUntracked);
        self.stats.bump(Counter::MunmapSyscalls);
        self.retry_enomem(os, || os.munmap(addr, len))
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
    /// everything; with `future`, defer nothing until munlockall.
    pub fn lock_all<O: Os, T>(
        &self,
        os: &O,
        future: bool,
        mut call: impl FnMut() -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        if self.active() {
            self.stats.bump(Counter::OtherCalls);
            if future {
                self.locked_future.store(true, Relaxed);
            }
            match self.lock() {
                Some(mut t) => {
                    t.mark_all();
                    self.flush_marked(os, &mut t);
                    self.stats.add(Counter::Forgotten, t.len() as u64);
                    t.clear();
                }
                None => self.dirty.record(0, usize::MAX),
            }
            return self.retry_enomem(os, call);
        }
        call()
    }

    /// munlockall: deferring may resume.
    pub fn unlock_all(&self) {
        self.locked_future.store(false, Relaxed);
    }

    /// In a child after `fork`: only the forking thread survives, so a lock
    /// held by another thread would never be released. Such a child forgets
    /// the table (its queued mappings stay mapped until it exits or execs).
    /// Counters restart so parent and child each report their own calls.
    pub fn after_fork_in_child(&self) {
        if self.table.is_locked() {
            // SAFETY: the holder was another thread of the parent; it does
            // not exist in this child, so nobody else uses the table.
            unsafe { self.table.force_unlock() };
            if let Some(mut t) = self.table.try_lock() {
                t.clear();
            }
        }
        self.dirty.reset_after_fork();
        self.sizing.reset_after_fork();
        self.stats.reset();
    }

    /// The one way in to the table: takes it without waiting (None if it is
    /// busy) and applies what calls that found it busy recorded.
    fn lock(&self) -> Option<spin::mutex::SpinMutexGuard<'_, Table>> {
        let mut t = self.table.try_lock()?;
        self.drain(&mut t);
        Some(t)
    }

    /// Releases what the program no longer has in `span`, as `span.effect`
    /// says; if the table is busy, records a modifying span for its holder.
    fn prepare<O: Os>(&self, os: &O, span: Span) {
        match self.lock() {
            Some(mut t) => {
                self.release(os, &mut t, span);
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
                State::Queued => {
                    let _ = os.munmap(e.start, e.len);
                    t.remove(e.slot);
                    self.stats.bump(Counter::Released);
                    self.stats.bump(Counter::MunmapSyscalls);
                }
                State::Live if span.effect == Effect::Modify => t.remove(e.slot),
                _ => {}
            }
        }
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
    /// or length caps: everything (`MUNMAPQ_EVICT=all`, the seed's way), or
    /// the least recently unmapped, each together with the queued mappings
    /// touching it (one munmap frees the run), until the queue is at 3/4 of
    /// its caps. On git with 16 KiB windows this cut flush munmaps from 800
    /// to 24 and kept 99.6% of the reuse (BENCHMARKS.md). Over the resident
    /// budget: the oldest quarter of the queued length at a time, RSS
    /// re-read after each, until the queue is under 3/4 of its budget.
    fn make_room<O: Os>(&self, os: &O, t: &mut Table, len: usize) -> bool {
        let caps = self.sizing.caps(os, t.queued(), t.queued_bytes(), len);
        let fits = |t: &Table| t.queued() < caps.entries && t.queued_bytes() + len <= caps.bytes;
        if caps.entries == 0 || len > caps.bytes {
            return false;
        }
        if fits(t) && !caps.resident_over {
            return true;
        }
        let evict_all = self.evict_all.load(Relaxed);
        if !fits(t) {
            if evict_all {
                t.mark_all();
            } else {
                let (max_n, max_b) = (caps.entries, caps.bytes);
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
        let flushed = match self.lock() {
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

    /// Queued mappings and bytes right now (None if the table is busy).
    pub fn queued(&self) -> Option<(usize, usize)> {
        self.table
            .try_lock()
            .map(|t| (t.queued(), t.queued_bytes()))
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
