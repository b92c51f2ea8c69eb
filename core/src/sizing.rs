//! How much may stay queued: the caps count what a queued mapping costs,
//! not how long it is.
//!
//! - **Resident memory.** A queued mapping costs the pages the program had
//!   faulted in (a 64 MiB pack window git read in three places costs a few
//!   pages). Those pages cannot grow while the mapping is queued (nobody
//!   touches it), so the queue's resident cost only changes when something
//!   is queued, reused or unmapped. The guard reads the process's current
//!   RSS (`/proc/self/statm` through an fd opened at load time; Mach
//!   `task_info` on macOS) only when the length queued since the last read
//!   (reused mappings queued again included: the program may have touched
//!   more of them) reaches a step of half the budget, so the unmeasured
//!   part is at most half the budget, and only while the queue is longer
//!   than the budget (a shorter one cannot hold more resident memory than
//!   its length). A read costs about 1-3 us (fstat + pread); with 16 KiB
//!   windows and the 4 MiB floor that is at most one read per 128
//!   deferrals. The queue's share of RSS is estimated as RSS less
//!   a baseline taken when the queue was empty; each eviction re-reads RSS
//!   and re-derives the baseline from what the eviction really freed, so
//!   the program's own growth does not stay charged to the queue.
//!   Budget: a quarter of that baseline, from 4 MiB to 1 GiB. Over it, on
//!   Linux the queued mappings' pages are dropped (`MADV_DONTNEED`, one
//!   call per run of touching mappings) and the mappings stay queued: the
//!   queue's resident cost falls to nothing and every reuse stays possible
//!   (a reused window faults its pages in again from the page cache, as a
//!   fresh mapping would). Where pages cannot be dropped (macOS), the
//!   oldest quarter of the queued length is unmapped at a time.
//! - **Address space**, only where it is limited (`RLIMIT_AS`): at most
//!   1 MiB and an eighth of the room left (the queue's own length counted
//!   as room), re-read at every deferral while a limit is set. The C
//!   library's own mappings (large mallocs, thread stacks) never pass
//!   through the hooks, so they cannot be retried after a flush; this
//!   bounds what they can lose to the queue.
//! - **Map count** (`vm.max_map_count`): at most a quarter of the mappings
//!   left, the queued ones counted as left. Counting the process's
//!   mappings means reading `/proc/self/maps` (cost grows with the number
//!   of mappings), so it is counted at the first deferral and then after a
//!   number of munmaps that grows with the room found: `max(64, left / 8)`.
//!
//! `MUNMAPQ_MAX_BYTES` replaces the resident guard by a fixed cap on the
//! queued length (the earlier meaning); the address-space and map-count
//! bounds always apply. Everything here runs under the table lock.

use crate::config::Config;
use crate::os::{Os, Usage};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// The smallest resident budget: below it the queue would flush on the
/// program's own small growth. Small-window git runs measured in
/// BENCHMARKS.md queue under 4 MiB at their best.
pub const RESIDENT_FLOOR: usize = 4 << 20;
/// The largest resident budget.
pub const RESIDENT_CEILING: usize = 1 << 30;
/// The budget is the baseline RSS shifted right by this (a quarter), so
/// peak RSS stays within about 1.25x of the program's own.
pub const RESIDENT_SHIFT: u32 = 2;
/// Under `RLIMIT_AS`: the most the queue may span.
pub const AS_QUEUE_MAX: usize = 1 << 20;
/// Under `RLIMIT_AS`: the queue spans at most the room left shifted by this.
pub const AS_ROOM_SHIFT: u32 = 3;
/// Under `vm.max_map_count`: the queue holds at most the mappings left
/// shifted by this.
pub const MAP_ROOM_SHIFT: u32 = 2;
/// Fewest munmaps between two counts of the process's mappings.
pub const MAP_CHECK_MIN: usize = 64;
/// Where the process's usage cannot be read (no /proc): a fixed cap on the
/// queued length instead of the resident budget.
pub const NO_USAGE_BYTES: usize = 64 << 20;
/// With a fixed byte cap and no `RLIMIT_AS`, how much queued length between
/// reads of the process's usage (which then only watches for a limit set
/// later).
const FIXED_STEP: usize = 8 << 20;

/// What may be queued right now.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Caps {
    pub entries: usize,
    pub bytes: usize,
    /// The queue holds more resident memory than its budget.
    pub resident_over: bool,
}

pub struct Sizing {
    max_entries: AtomicUsize,
    /// `MUNMAPQ_MAX_BYTES`, or `usize::MAX`.
    fixed_bytes: AtomicUsize,
    resident_guard: AtomicBool,
    /// `vm.max_map_count`, or 0 where there is none.
    map_limit: AtomicUsize,
    entries_cap: AtomicUsize,
    as_cap: AtomicUsize,
    as_limited: AtomicBool,
    /// RSS of the program without its queue (estimated), bytes.
    rss_base: AtomicUsize,
    /// RSS at the last read.
    rss_last: AtomicUsize,
    /// Queued length added since the last read.
    unread_bytes: AtomicUsize,
    /// Deferral candidates left before the map count is re-read.
    until_map_check: AtomicUsize,
    /// The last read of the process's usage failed.
    no_usage: AtomicBool,
    /// Derived by `refresh`: queue length below which no read is needed,
    /// length queued between reads, and the length cap.
    quiet_len: AtomicUsize,
    read_step: AtomicUsize,
    bytes_cap: AtomicUsize,
}

impl Default for Sizing {
    fn default() -> Self {
        Self::new()
    }
}

impl Sizing {
    /// All zero bytes (so the engine's static sits in `.bss`); nothing is
    /// read before [`Sizing::start`] sets every field the caps use.
    pub const fn new() -> Self {
        Sizing {
            max_entries: AtomicUsize::new(0),
            fixed_bytes: AtomicUsize::new(0),
            resident_guard: AtomicBool::new(false),
            map_limit: AtomicUsize::new(0),
            entries_cap: AtomicUsize::new(0),
            as_cap: AtomicUsize::new(0),
            as_limited: AtomicBool::new(false),
            rss_base: AtomicUsize::new(0),
            rss_last: AtomicUsize::new(0),
            unread_bytes: AtomicUsize::new(0),
            until_map_check: AtomicUsize::new(0),
            no_usage: AtomicBool::new(false),
            quiet_len: AtomicUsize::new(0),
            read_step: AtomicUsize::new(0),
            bytes_cap: AtomicUsize::new(0),
        }
    }

    pub fn start(&self, cfg: &Config) {
        self.max_entries.store(cfg.max_entries, Relaxed);
        self.entries_cap.store(cfg.max_entries, Relaxed);
        self.fixed_bytes
            .store(cfg.max_bytes.unwrap_or(usize::MAX), Relaxed);
        self.resident_guard.store(cfg.max_bytes.is_none(), Relaxed);
        self.map_limit
            .store(cfg.map_count_limit.unwrap_or(0), Relaxed);
        self.as_limited
            .store(cfg.address_space_limit.is_some(), Relaxed);
        self.as_cap.store(
            if cfg.address_space_limit.is_some() {
                0
            } else {
                usize::MAX
            },
            Relaxed,
        );
        // Read everything at the first deferral.
        self.unread_bytes.store(usize::MAX, Relaxed);
        self.until_map_check.store(0, Relaxed);
        self.no_usage.store(false, Relaxed);
        self.refresh();
    }

    /// `vm.max_map_count` is `limit`, learnt only now (it is read just
    /// before the first mapping is queued, not at load): the count cap is
    /// at most `cap`, and the mappings left are counted at the next call.
    pub fn bound_by_map_count(&self, limit: usize, cap: usize) {
        self.map_limit.store(limit, Relaxed);
        self.max_entries.fetch_min(cap, Relaxed);
        self.entries_cap.fetch_min(cap, Relaxed);
        self.until_map_check.store(0, Relaxed);
    }

    /// The cap on the queued length in force now (`usize::MAX`: only the
    /// resident budget bounds it).
    pub fn byte_cap(&self) -> usize {
        self.bytes_cap.load(Relaxed)
    }

    /// In a child after fork: its memory is its own from now on.
    pub fn reset_after_fork(&self) {
        self.unread_bytes.store(usize::MAX, Relaxed);
        self.until_map_check.store(0, Relaxed);
    }

    /// The resident budget for a baseline RSS.
    pub fn budget_for(base: usize) -> usize {
        (base >> RESIDENT_SHIFT).clamp(RESIDENT_FLOOR, RESIDENT_CEILING)
    }

    fn budget(&self) -> usize {
        Self::budget_for(self.rss_base.load(Relaxed))
    }

    /// Recomputes what `caps` compares against on every call, after
    /// anything they derive from changed (kept apart so the common call is
    /// a few loads).
    fn refresh(&self) {
        let (as_limited, guard) = (
            self.as_limited.load(Relaxed),
            self.resident_guard.load(Relaxed),
        );
        let budget = self.budget();
        // A queue no longer than the budget cannot hold more resident
        // memory than it: no need to ask (the micro-benchmark's 64 windows
        // never do).
        self.quiet_len
            .store(if as_limited || !guard { 0 } else { budget }, Relaxed);
        let step = if as_limited {
            0
        } else if guard {
            budget >> 1
        } else {
            FIXED_STEP
        };
        self.read_step.store(step, Relaxed);
        let mut bytes = self
            .fixed_bytes
            .load(Relaxed)
            .min(self.as_cap.load(Relaxed));
        if self.no_usage.load(Relaxed) && guard {
            bytes = bytes.min(NO_USAGE_BYTES);
        }
        self.bytes_cap.store(bytes, Relaxed);
    }

    /// The caps for queueing one more mapping of `len` bytes onto a queue of
    /// `queued` mappings spanning `queued_bytes`; re-reads what is due.
    pub fn caps<O: Os>(&self, os: &O, queued: usize, queued_bytes: usize, len: usize) -> Caps {
        self.check_map_count(os, queued);
        let unread = self.unread_bytes.load(Relaxed);
        let mut resident_over = false;
        if unread == usize::MAX
            || (queued_bytes.saturating_add(len) > self.quiet_len.load(Relaxed)
                && unread.saturating_add(len) > self.read_step.load(Relaxed))
        {
            // Reset first, for the same reason as in `check_map_count`.
            self.unread_bytes.store(0, Relaxed);
            let usage = os.usage();
            if let Some(u) = usage {
                self.read_usage(os, u, queued_bytes);
                resident_over = self.resident_guard.load(Relaxed)
                    && u.resident.saturating_sub(self.rss_base.load(Relaxed)) > self.budget();
            }
            self.no_usage.store(usage.is_none(), Relaxed);
            self.unread_bytes.store(0, Relaxed);
            self.refresh();
        }
        Caps {
            entries: self.entries_cap.load(Relaxed),
            bytes: self.bytes_cap.load(Relaxed),
            resident_over,
        }
    }

    /// A mapping of `len` bytes was queued.
    pub fn note_queued(&self, len: usize) {
        let u = self.unread_bytes.load(Relaxed);
        self.unread_bytes.store(u.saturating_add(len), Relaxed);
    }

    fn read_usage<O: Os>(&self, os: &O, u: Usage, queued_bytes: usize) {
        self.rss_last.store(u.resident, Relaxed);
        let base = self.rss_base.load(Relaxed);
        if queued_bytes == 0 || u.resident < base {
            self.rss_base.store(u.resident, Relaxed);
        }
        match os.address_space_limit() {
            Some(limit) => {
                let room = limit.saturating_sub(u.size.saturating_sub(queued_bytes));
                self.as_cap
                    .store(AS_QUEUE_MAX.min(room >> AS_ROOM_SHIFT), Relaxed);
                self.as_limited.store(true, Relaxed);
            }
            None => {
                self.as_cap.store(usize::MAX, Relaxed);
                self.as_limited.store(false, Relaxed);
            }
        }
    }

    fn check_map_count<O: Os>(&self, os: &O, queued: usize) {
        let limit = self.map_limit.load(Relaxed);
        if limit == 0 {
            return;
        }
        let left = self.until_map_check.load(Relaxed);
        if left > 0 {
            self.until_map_check.store(left - 1, Relaxed);
            return;
        }
        let max = self.max_entries.load(Relaxed);
        // Not due again for a while even if this read never returns (a
        // signal handler that longjmps out of the hook): a read that is
        // interrupted every time must not be retried on every call.
        self.until_map_check.store(MAP_CHECK_MIN, Relaxed);
        let Some(count) = os.map_count() else {
            return;
        };
        let room = limit.saturating_sub(count.saturating_sub(queued));
        self.entries_cap
            .store(max.min(room >> MAP_ROOM_SHIFT), Relaxed);
        self.until_map_check
            .store(MAP_CHECK_MIN.max(room >> 3), Relaxed);
    }

    /// After evicting `freed` bytes of queued length, `remaining` still
    /// queued: re-reads RSS, charges the queue with the remaining length at
    /// the resident ratio the eviction showed, and answers whether the
    /// queue is still above 3/4 of its budget.
    pub fn after_eviction<O: Os>(&self, os: &O, freed: usize, remaining: usize) -> bool {
        let Some(u) = os.usage() else {
            return false;
        };
        let before = self.rss_last.load(Relaxed);
        let dropped = before.saturating_sub(u.resident);
        let charged = if remaining == 0 {
            0
        } else if freed == 0 {
            remaining
        } else {
            let ratio = dropped as u128 * remaining as u128 / freed as u128;
            (ratio as usize).min(remaining)
        };
        self.rss_last.store(u.resident, Relaxed);
        self.rss_base
            .store(u.resident.saturating_sub(charged), Relaxed);
        self.unread_bytes.store(0, Relaxed);
        self.refresh();
        let budget = self.budget();
        remaining > 0 && charged > budget - budget / 4
    }
}
