//! What the table lock guards: the mapping table and what changes only
//! with it, what may stay queued ([`Sizing`]) and how a full queue is
//! evicted ([`Evict`]); and what is done with them held to make room.
//! Plain fields: whoever holds the lock ([`crate::holder::TableGuard`])
//! has all of it to itself.

use crate::config::Config;
use crate::dirty::DirtyRanges;
use crate::os::Os;
use crate::sizing::Sizing;
use crate::stats::{Counter, Stats};
use crate::table::{Evict, Table};

/// Over the resident budget, page drops are budgeted at one per this many
/// deferrals (at least one each time the budget is exceeded): a drop costs
/// a system call, as the munmap a deferral saves did.
pub const DEFERRED_PER_DROP: u64 = 8;

/// What the lock holder reports to and checks against, outside the
/// table: the counters, and the ranges calls that found the table busy
/// changed meanwhile (none of which is unmapped or dropped).
#[derive(Clone, Copy)]
pub struct Books<'a> {
    /// None where nobody reads the counters (`Engine::count_quietly`).
    pub stats: Option<&'a Stats>,
    pub dirty: &'a DirtyRanges,
}

impl Books<'_> {
    #[inline]
    pub fn count(&self, c: Counter, n: u64) {
        if let Some(s) = self.stats {
            s.add(c, n);
        }
    }

    /// Really unmaps `[start, start + len)`, a range munmapq holds, but
    /// for what a call that found the table busy recorded there since the
    /// holder drained (it may be the program's new mapping now). Answers
    /// whether some of it was left mapped (forgotten: the program's now).
    pub fn unmap<O: Os>(&self, os: &O, start: usize, len: usize) -> bool {
        self.unmap_since(os, start, len, self.dirty.epoch())
    }

    /// [`Books::unmap`], leaving the range mapped from where a call that
    /// began at `since` or later (a [`DirtyRanges::epoch`]) is found to
    /// have lost its record.
    pub fn unmap_since<O: Os>(&self, os: &O, start: usize, len: usize, since: u64) -> bool {
        let skipped = self
            .dirty
            .each_clear_piece(start, start + len, since, |s, e| {
                let _ = os.munmap(s, e - s);
                self.count(Counter::MunmapSyscalls, 1);
            });
        if skipped {
            self.count(Counter::ForgottenQueued, 1);
        }
        skipped
    }
}

pub struct Queue {
    pub table: Table,
    pub sizing: Sizing,
    /// How a full queue is evicted.
    pub policy: Evict,
}

impl Default for Queue {
    fn default() -> Self {
        Self::new()
    }
}

impl Queue {
    /// All zero bytes, like each of its parts (see [`Sizing::new`]).
    pub const fn new() -> Self {
        Queue {
            table: Table::new(),
            sizing: Sizing::new(),
            policy: Evict::Oldest,
        }
    }

    pub fn start(&mut self, cfg: &Config) {
        self.sizing.start(cfg);
        self.policy = cfg.evict;
    }

    /// Evicts so that one more mapping of `len` bytes fits under the count
    /// and length caps [`crate::sizing`] sets, as [`Self::policy`] says,
    /// and answers whether it does. `books` is asked for only where
    /// something is evicted.
    pub fn make_room<'b, O: Os>(
        &mut self,
        os: &O,
        books: impl FnOnce() -> Books<'b>,
        len: usize,
    ) -> bool {
        let (queued, queued_bytes) = (self.table.queued(), self.table.queued_bytes());
        let caps = self.sizing.caps(os, queued, queued_bytes, len);
        let fits = |t: &Table| t.queued() < caps.entries && t.queued_bytes() + len <= caps.bytes;
        // Fitting already, the caps are neither 0 entries nor under `len`.
        if fits(&self.table) {
            return true;
        }
        if caps.entries == 0 || len > caps.bytes {
            return false;
        }
        self.table
            .mark_to_fit(self.policy, caps.entries, caps.bytes, len);
        self.flush_marked(os, books());
        fits(&self.table)
    }

    /// The program made many mappings of its own since the last count:
    /// counts them now, and evicts down to the count cap that leaves.
    /// Answers how many more it may make before the next count
    /// ([`Sizing::count_maps_now`]).
    pub fn recount_maps<O: Os>(&mut self, os: &O, books: Books) -> usize {
        let queued = self.table.queued();
        let (entries, allowed) = self.sizing.count_maps_now(os, queued);
        if queued > entries {
            self.table
                .mark_to_fit(self.policy, entries.saturating_add(1), usize::MAX, 0);
            self.flush_marked(os, books);
        }
        allowed
    }

    /// Whether [`Queue::keep_within_budget`] may have anything to do: not
    /// while the warm length is within what the budget surely allows
    /// ([`Sizing::warm_fits`]), as after most deferrals.
    #[inline(always)]
    pub fn may_be_over_budget(&self) -> bool {
        self.table.warm_bytes() > self.sizing.warm_fits()
    }

    /// After a mapping was queued: keeps the queue's resident memory within
    /// its budget. Over it, the pages of the oldest warm mappings are
    /// dropped as far as needed, in at most one drop per
    /// [`DEFERRED_PER_DROP`] deferrals (at least one each time; with
    /// [`Evict::All`], every warm mapping's): the mappings stay queued for
    /// reuse. A run whose pages could not be dropped is unmapped instead,
    /// and so is one a call that found the table busy has touched since
    /// (dropping there could zero the program's new mapping; the unmap
    /// leaves that part alone).
    pub fn keep_within_budget<O: Os>(&mut self, os: &O, books: Books, page: usize) {
        let (queued_bytes, warm) = (self.table.queued_bytes(), self.table.warm_bytes());
        let Some(over) = self.sizing.over_budget(os, queued_bytes, warm) else {
            return;
        };
        let (cool, max_drops) = if self.policy == Evict::All {
            (warm, usize::MAX)
        } else {
            let allowed = (self.table.enqueues() / DEFERRED_PER_DROP)
                .saturating_sub(self.table.cooling_drops());
            (over.cool, allowed.max(1) as usize)
        };
        let mut dropped = false;
        let gone = self
            .table
            .cool_by_age(cool, max_drops, page, &mut |start, len| {
                let ok =
                    !books.dirty.pending_overlaps(start, start + len) && os.drop_pages(start, len);
                dropped |= ok;
                ok
            });
        if dropped {
            books.count(Counter::PagesDropped, 1);
        }
        self.flush_marked(os, books);
        if gone > 0 && over.measured {
            self.sizing.after_cooling(os, gone, self.table.warm_bytes());
        }
    }

    /// Unmaps every queued mapping.
    pub fn flush_all<O: Os>(&mut self, os: &O, books: Books) {
        self.flush_up_to(os, books, usize::MAX);
    }

    /// Unmaps every queued mapping of at most `len` bytes.
    pub fn flush_up_to<O: Os>(&mut self, os: &O, books: Books, len: usize) {
        self.table.mark_up_to(len);
        self.flush_marked(os, books);
    }

    /// Unmaps the entries marked for eviction, one munmap per run of
    /// touching ones.
    pub fn flush_marked<O: Os>(&mut self, os: &O, books: Books) {
        let n = self.table.evict_marked(|start, len| {
            books.unmap(os, start, len);
        });
        if n > 0 {
            books.count(Counter::Flushes, 1);
            books.count(Counter::Flushed, n as u64);
        }
    }
}
