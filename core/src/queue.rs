//! What the table lock guards: the mapping table and what changes only
//! with it, what may stay queued ([`Sizing`]) and how a full queue is
//! evicted ([`Evict`]); and what is done with them held to make room.
//! Plain fields: whoever holds the lock ([`crate::holder::TableGuard`])
//! has all of it to itself.

use crate::config::Config;
use crate::os::Os;
use crate::sizing::Sizing;
use crate::stats::{Counter, Stats};
use crate::table::{Evict, Table};

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

    /// Evicts so that one more mapping of `len` bytes fits under the caps
    /// [`crate::sizing`] sets, as [`Self::policy`] says, and answers whether
    /// it does. Over the resident budget, the queued mappings' pages are
    /// dropped (Linux); where they cannot be (macOS), what
    /// [`Table::mark_over_budget`] marks goes, RSS re-read after each time,
    /// until the queue is under 3/4 of its budget.
    pub fn make_room<O: Os>(&mut self, os: &O, stats: &Stats, len: usize) -> bool {
        let (queued, queued_bytes) = (self.table.queued(), self.table.queued_bytes());
        let caps = self.sizing.caps(os, queued, queued_bytes, len);
        let fits = |t: &Table| t.queued() < caps.entries && t.queued_bytes() + len <= caps.bytes;
        if caps.entries == 0 || len > caps.bytes {
            return false;
        }
        if fits(&self.table) && !caps.resident_over {
            return true;
        }
        if !fits(&self.table) {
            self.table
                .mark_to_fit(self.policy, caps.entries, caps.bytes, len);
            self.flush_marked(os, stats);
        }
        if caps.resident_over && self.drop_queued_pages(os, stats) {
            self.sizing.after_eviction(os, 0, 0);
        } else if caps.resident_over {
            loop {
                let before = self.table.queued_bytes();
                self.table.mark_over_budget(self.policy);
                self.flush_marked(os, stats);
                let after = self.table.queued_bytes();
                if !self.sizing.after_eviction(os, before - after, after) {
                    break;
                }
            }
        }
        fits(&self.table)
    }

    /// Drops the pages of every queued mapping, keeping the mappings (one
    /// madvise per run of touching ones): the queue's resident cost goes
    /// back to nothing and every reuse stays possible.
    fn drop_queued_pages<O: Os>(&mut self, os: &O, stats: &Stats) -> bool {
        let mut ok = true;
        self.table.queued_runs(|start, len| {
            ok &= os.drop_pages(start, len);
        });
        if ok {
            stats.bump(Counter::PagesDropped);
        }
        ok
    }

    /// Unmaps every queued mapping.
    pub fn flush_all<O: Os>(&mut self, os: &O, stats: &Stats) {
        self.table.mark_all();
        self.flush_marked(os, stats);
    }

    /// Unmaps the entries marked for eviction, one munmap per run of
    /// touching ones.
    pub fn flush_marked<O: Os>(&mut self, os: &O, stats: &Stats) {
        let n = self.table.evict_marked(|start, len| {
            let _ = os.munmap(start, len);
            stats.bump(Counter::MunmapSyscalls);
        });
        if n > 0 {
            stats.bump(Counter::Flushes);
            stats.add(Counter::Flushed, n as u64);
        }
    }
}
