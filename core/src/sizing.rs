//! How much may stay queued: the caps count what a queued mapping costs,
//! not how long it is.
//!
//! - **Resident memory.** A queued mapping costs the pages the program had
//!   faulted in (a 64 MiB pack window git read in three places costs a few
//!   pages). Those pages cannot grow while the mapping is queued (nobody
//!   touches it). The queue tells warm entries (queued since the program
//!   last used them) from cold ones (their pages dropped since), and
//!   estimates its resident memory as the warm length times a density:
//!   the resident memory per warm byte the last reads showed (1 until
//!   then). Reading the process's RSS ([`Os::usage`]: `/proc/self/statm`
//!   opened, read and closed, no descriptor kept; Mach `task_info` on
//!   macOS) costs system calls, so it is read now and then, not at each
//!   deferral: only while the warm length is more than the budget (a
//!   shorter one cannot hold more resident memory than it), and then once
//!   per [`READ_EVERY`] deferrals. The queue's share of RSS is RSS less a baseline taken when
//!   the queue was empty, re-derived after each drop from what the drop
//!   really freed, so that the program's own growth does not stay charged
//!   to the queue; that drop also measures the density.
//!   Budget: a quarter of the larger of that baseline and the process's
//!   peak RSS ([`Os::peak_resident`], read with it), from 4 MiB to 1 GiB.
//!   Over it (by a read, or by the estimate in between), the pages of the
//!   oldest warm mappings are dropped, as far as the budget needs (down to
//!   3/4 of it), the mappings staying queued: a cache's eviction, the young
//!   windows,
//!   the likeliest to be reused soon, keep their pages, and every reuse
//!   stays possible (a reused window faults its pages in again from the
//!   page cache, as a fresh mapping would). A run whose pages could not be
//!   dropped is unmapped instead.
//!   On macOS no resident budget is kept ([`Os::drops_free_memory`]): the
//!   queued pages are clean pages of files, which XNU does not charge to
//!   the process's footprint (`phys_footprint`, what jetsam limits and
//!   Activity Monitor shows, is internal, compressed, IOKit, purgeable
//!   and page-table memory: xnu `osfmk/arm64/sptm/pmap/pmap.c`, the
//!   comment above `pmap_destroy_internal`), and a drop (`MADV_DONTNEED`
//!   only deactivates pages there; `mprotect` to `PROT_NONE` reaches
//!   `pmap_remove_options`) would only unlink the
//!   translations: the pages stay in the unified buffer cache, where the
//!   pageout daemon reclaims them as it would after a real munmap. It
//!   would lower `resident_size` (what `ps` and `ru_maxrss` show) and free
//!   nothing; so no drop, and no read of the process's usage for it.
//! - **Address space**, only where it is limited (`RLIMIT_AS`): at most
//!   1 MiB and an eighth of the room left (the queue's own length counted
//!   as room), re-read at every deferral while a limit is set. The C
//!   library's own mappings (large mallocs, thread stacks) never pass
//!   through the hooks, so they cannot be retried after a flush; this
//!   bounds what they can lose to the queue.
//! - **Map count** (`vm.max_map_count`): at most a quarter of the mappings
//!   left, the queued ones counted as left (the table knows them; only the
//!   program's own mappings need counting). Counting them means reading
//!   `/proc/self/maps`, where the kernel formats a line and a path for
//!   every mapping, queued ones included: about 13 ms for 4,000 mappings
//!   here, more than a thousand deferrals save, and in proportion to the
//!   mappings. So it is counted at the first deferral and then after a
//!   number of munmaps that grows with the room found and with the
//!   mappings counted: `max(64, left / 2, mappings / 2)`, doubling at each
//!   count that finds too little room for the queue to be of use (or
//!   cannot read the file at all). The quarter cap leaves the program
//!   three quarters of the room for mappings of its own made between two
//!   counts; the mappings it makes through the hooks are retried after a
//!   flush if the kernel refuses them.
//!
//! Where the process's usage cannot be read (no /proc in a chroot or
//! container, a Landlock rule), the queue is bounded by a fixed length
//! ([`NO_USAGE_BYTES`]) and the read is tried again after 16, 32, 64, ...
//! deferrals (at most 65,536), not at each one; the failures are counted
//! (`unreadable` in the statistics).
//!
//! `MUNMAPQ_MAX_BYTES` replaces the resident guard by a fixed cap on the
//! queued length; the address-space and map-count bounds always apply.
//! [`Sizing`] is part of what the table lock guards
//! ([`crate::queue::Queue`]): plain fields, changed only by the holder.

use crate::config::Config;
use crate::os::{Os, Usage};
use core::sync::atomic::{compiler_fence, Ordering::SeqCst};

/// The smallest resident budget: below it the queue would flush on the
/// program's own small growth.
pub const RESIDENT_FLOOR: usize = 4 << 20;
/// The largest resident budget.
pub const RESIDENT_CEILING: usize = 1 << 30;
/// The budget is the larger of the baseline and the peak RSS shifted right
/// by this (a quarter): a peak that includes the queue grows by at most a
/// third.
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
/// A count cap below this is of little use: the counts that find one are
/// spaced further and further apart.
const MAP_USEFUL: usize = 16;
/// The longest wait, in deferral candidates, between two reads of what
/// could not be read or found no room.
const MAX_BACKOFF: usize = 1 << 16;
/// Where the process's usage cannot be read (no /proc): a fixed cap on the
/// queued length instead of the resident budget.
pub const NO_USAGE_BYTES: usize = 64 << 20;
/// With a fixed byte cap and no `RLIMIT_AS`, how much queued length between
/// reads of the process's usage (which then only watches for a limit set
/// later).
const FIXED_STEP: usize = 8 << 20;
/// While the warm length is over the budget, the most deferrals between two
/// reads of RSS.
pub const READ_EVERY: u32 = 16;
/// The density (resident bytes per warm queued byte) in fixed point: this
/// is 1.
const DENSE: u64 = 1 << 16;
/// The least density assumed: a measure of 0 (pages the program never
/// touched) must not let the estimate ignore the next warm mappings.
const DENSITY_FLOOR: u64 = DENSE / 1024;

/// What may be queued right now.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Caps {
    pub entries: usize,
    pub bytes: usize,
}

/// What the resident budget asks after a deferral.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Over {
    /// Warm queued length whose pages to drop.
    pub cool: usize,
    /// RSS was read just now: after the drop, read it again and learn
    /// from the difference ([`Sizing::after_cooling`]).
    pub measured: bool,
}

pub struct Sizing {
    max_entries: usize,
    /// `MUNMAPQ_MAX_BYTES`, or `usize::MAX`.
    fixed_bytes: usize,
    resident_guard: bool,
    /// `vm.max_map_count`, or 0 where there is none.
    map_limit: usize,
    entries_cap: usize,
    as_cap: usize,
    as_limited: bool,
    /// Under `RLIMIT_AS`: the room the kernel had for new mappings at the
    /// last read, were nothing queued (0: unknown, `usize::MAX`: no limit).
    as_room: usize,
    /// RSS of the program without its queue (estimated), bytes.
    rss_base: usize,
    /// RSS at the last read.
    rss_last: usize,
    /// The process's peak RSS at the last read (0: unknown).
    rss_peak: usize,
    /// Queued length added since the last read.
    unread_bytes: usize,
    /// Deferrals since the last read.
    unread_count: u32,
    /// Resident bytes per warm queued byte, times [`DENSE`].
    density: u64,
    /// `density` was measured (else it is 1).
    density_known: bool,
    /// Deferral candidates left before the map count is re-read.
    until_map_check: usize,
    /// Mappings the program may make through the hooks, passing straight
    /// while the engine is engaged, before they are counted again: a
    /// quarter of the room the last count found, so that the program keeps
    /// three quarters of it whatever it maps in between (0: not counted).
    map_recount: usize,
    /// The last read of the process's usage failed.
    no_usage: bool,
    /// After failed reads of the usage (no /proc): reads skipped before the
    /// next try, and the number skipped after the last failure (doubled at
    /// each failure), so that an unreadable /proc costs a few tries, not
    /// one per deferral.
    usage_skip: u32,
    usage_backoff: u32,
    /// After counts of the mappings that failed or found no useful room:
    /// the wait before the next count (doubled at each such count).
    map_backoff: usize,
    /// Reads of the usage or the mappings that failed, not yet reported
    /// ([`Sizing::take_unreadable`]).
    unreadable: u64,
    /// Derived by `refresh`: length queued between reads (under a fixed
    /// cap or an address-space limit), and the length cap.
    read_step: usize,
    bytes_cap: usize,
    /// Derived by `refresh`: the warm length at or under which no deferral
    /// can be over the resident budget (the budget; `usize::MAX` without
    /// the guard; 0 before `start`), so that `over_budget` answers most
    /// deferrals with one compare.
    warm_fits: usize,
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
            max_entries: 0,
            fixed_bytes: 0,
            resident_guard: false,
            map_limit: 0,
            entries_cap: 0,
            as_cap: 0,
            as_limited: false,
            as_room: 0,
            rss_base: 0,
            rss_last: 0,
            rss_peak: 0,
            unread_bytes: 0,
            unread_count: 0,
            density: 0,
            density_known: false,
            until_map_check: 0,
            map_recount: 0,
            no_usage: false,
            usage_skip: 0,
            usage_backoff: 0,
            map_backoff: 0,
            unreadable: 0,
            read_step: 0,
            bytes_cap: 0,
            warm_fits: 0,
        }
    }

    pub fn start(&mut self, cfg: &Config) {
        self.max_entries = cfg.max_entries;
        self.entries_cap = cfg.max_entries;
        self.fixed_bytes = cfg.max_bytes.unwrap_or(usize::MAX);
        self.resident_guard = cfg.max_bytes.is_none();
        self.map_limit = cfg.map_count_limit.unwrap_or(0);
        self.as_limited = cfg.address_space_limit.is_some();
        self.as_room = 0;
        self.as_cap = if cfg.address_space_limit.is_some() {
            0
        } else {
            usize::MAX
        };
        // Read everything at the first deferral.
        self.unread_bytes = usize::MAX;
        self.density = DENSE;
        self.density_known = false;
        self.until_map_check = 0;
        self.no_usage = false;
        self.usage_skip = 0;
        self.usage_backoff = 0;
        self.map_backoff = 0;
        self.refresh();
    }

    /// `vm.max_map_count` is `limit`, learnt only now (it is read just
    /// before the first mapping is queued, not at load): the count cap is
    /// at most `cap`, and the mappings left are counted at the next call.
    pub fn bound_by_map_count(&mut self, limit: usize, cap: usize) {
        self.map_limit = limit;
        self.max_entries = self.max_entries.min(cap);
        self.entries_cap = self.entries_cap.min(cap);
        self.until_map_check = 0;
    }

    /// The warm length at or under which no deferral is over the resident
    /// budget ([`Sizing::over_budget`] answers None).
    #[inline(always)]
    pub fn warm_fits(&self) -> usize {
        self.warm_fits
    }

    /// The cap on the queued length in force now (`usize::MAX`: only the
    /// resident budget bounds it).
    pub fn byte_cap(&self) -> usize {
        self.bytes_cap
    }

    /// `RLIMIT_AS` was changed by the program: the address-space room is
    /// read again at the next deferral, and at each one while a limit is
    /// set (found unlimited, the bound goes away again).
    pub fn limit_changed(&mut self) {
        self.as_limited = true;
        self.as_cap = 0;
        self.as_room = 0;
        self.unread_bytes = usize::MAX;
        self.refresh();
    }

    /// Whether a reuse of `len` bytes must first check that the kernel
    /// would have room for a fresh mapping under `RLIMIT_AS` (reading the
    /// process's size, several system calls): only under a limit, and only
    /// when `len` is more than half the room the last read found (the
    /// room is read at every deferral under a limit; a reuse moves nothing
    /// in or out of the address space, so only the program's own mappings
    /// made since, more than half the room, could make a smaller reuse one
    /// the kernel would refuse).
    pub fn reuse_needs_room_check(&self, len: usize) -> bool {
        self.as_limited && len > self.as_room / 2
    }

    /// In a child after fork: its memory is its own from now on.
    pub fn reset_after_fork(&mut self) {
        self.unread_bytes = usize::MAX;
        self.until_map_check = 0;
    }

    /// The resident budget for a baseline RSS.
    pub fn budget_for(base: usize) -> usize {
        (base >> RESIDENT_SHIFT).clamp(RESIDENT_FLOOR, RESIDENT_CEILING)
    }

    /// The budget: a quarter of the larger of the program's own RSS and
    /// its peak RSS. The peak counts what the queue held too, yet the
    /// queue's share stays bounded: at most a quarter of a peak that
    /// includes it, so the peak grows by at most a third. A program whose
    /// RSS falls from its peak keeps a budget its peak already paid for.
    fn budget(&self) -> usize {
        Self::budget_for(self.rss_base.max(self.rss_peak))
    }

    /// Recomputes what `caps` compares against on every call, after
    /// anything they derive from changed (kept apart so the common call is
    /// a few loads).
    fn refresh(&mut self) {
        self.read_step = if self.as_limited { 0 } else { FIXED_STEP };
        let guard = self.resident_guard;
        let mut bytes = self.fixed_bytes.min(self.as_cap);
        if self.no_usage && guard {
            bytes = bytes.min(NO_USAGE_BYTES);
        }
        self.bytes_cap = bytes;
        self.warm_fits = if guard { self.budget() } else { usize::MAX };
    }

    /// The caps for queueing one more mapping of `len` bytes onto a queue of
    /// `queued` mappings spanning `queued_bytes`; re-reads what is due for
    /// them (the address-space room under a limit; the resident budget is
    /// [`Sizing::over_budget`]'s).
    pub fn caps<O: Os>(&mut self, os: &O, queued: usize, queued_bytes: usize, len: usize) -> Caps {
        self.check_map_count(os, queued);
        let unread = self.unread_bytes;
        let due = unread == usize::MAX
            || (!self.resident_guard || self.as_limited)
                && unread.saturating_add(len) > self.read_step;
        if due {
            self.read(os, queued_bytes);
        }
        Caps {
            entries: self.entries_cap,
            bytes: self.bytes_cap,
        }
    }

    /// Reads the process's usage now. Answers the queue's share of RSS
    /// (RSS less the baseline), if it could be read.
    /// Where the usage cannot be read (no /proc, a sandbox), tries are
    /// spaced further and further apart (see `usage_skip`) and answer None
    /// in between; the queue is then bounded by [`NO_USAGE_BYTES`].
    fn read<O: Os>(&mut self, os: &O, queued_bytes: usize) -> Option<usize> {
        // Reset first, for the same reason as in `check_map_count`.
        self.unread_bytes = 0;
        self.unread_count = 0;
        if self.usage_skip > 0 {
            self.usage_skip -= 1;
            return None;
        }
        // The baseline and the peak change below, and `refresh` follows
        // only once the last system call returned: a longjmp out of one
        // of those calls must leave `over_budget` to its own tests, not to
        // what an older baseline let through.
        self.warm_fits = 0;
        compiler_fence(SeqCst);
        let usage = os.usage();
        let share = usage.map(|u| {
            self.read_usage(os, u, queued_bytes);
            u.resident.saturating_sub(self.rss_base)
        });
        self.no_usage = usage.is_none();
        if self.no_usage {
            // The limit is read without /proc: where there is none (the
            // engine starts as if there were one, until it has read it),
            // the room need not be read at every deferral.
            if self.as_limited && os.address_space_limit().is_none() {
                self.unlimited();
            }
            self.unreadable += 1;
            self.usage_backoff =
                (self.usage_backoff.saturating_mul(2)).clamp(READ_EVERY, MAX_BACKOFF as u32);
            self.usage_skip = self.usage_backoff;
        } else {
            self.usage_backoff = 0;
        }
        self.unread_bytes = 0;
        self.refresh();
        share
    }

    /// Reads of the process's usage or mappings that failed since the last
    /// call (for the statistics).
    pub fn take_unreadable(&mut self) -> u64 {
        core::mem::take(&mut self.unreadable)
    }

    /// A mapping was just queued; the queue is `queued_bytes` long, `warm`
    /// of it warm. Whether it now holds more resident memory than its
    /// budget, by a read of RSS when one is due, else by the estimate; and
    /// then how much warm length to cool, down to 3/4 of the budget.
    pub fn over_budget<O: Os>(&mut self, os: &O, queued_bytes: usize, warm: usize) -> Option<Over> {
        // What the tests below answer for most deferrals: the budget and
        // the guard change only where `refresh` follows.
        if warm <= self.warm_fits {
            return None;
        }
        // Where a drop frees nothing the system charges (macOS), no budget
        // is kept: neither reads nor drops, which would only move a number.
        if !self.resident_guard || !os.drops_free_memory() {
            return None;
        }
        let budget = self.budget();
        if warm <= budget {
            return None;
        }
        let due = self.unread_count >= READ_EVERY || self.unread_bytes == usize::MAX;
        let (resident, measured) = if due {
            let share = self.read(os, queued_bytes)?;
            // What the whole warm queue holds per byte, as far as the
            // baseline is right (it is re-derived at each measured drop).
            if self.density_known {
                self.learn_density(share, warm);
            }
            (share, true)
        } else {
            let estimate = self.estimate(warm);
            if estimate <= budget {
                return None;
            }
            // Until a drop has measured the density (1 until then), the
            // drop is measured: RSS read before it, and again after.
            if !self.density_known {
                self.read(os, queued_bytes)?;
            }
            (estimate, !self.density_known)
        };
        let budget = self.budget();
        if resident <= budget {
            return None;
        }
        let excess = resident - (budget - budget / 4);
        let cool = (excess as u128 * DENSE as u128 / self.density as u128).min(warm as u128);
        Some(Over {
            cool: cool as usize,
            measured,
        })
    }

    /// `resident` bytes were found in `warm` bytes of warm queued mappings.
    fn learn_density(&mut self, resident: usize, warm: usize) {
        self.density = (resident as u128 * DENSE as u128 / warm.max(1) as u128)
            .clamp(DENSITY_FLOOR as u128, DENSE as u128) as u64;
        self.density_known = true;
    }

    /// The queue's resident memory estimated from its warm length.
    fn estimate(&self, warm: usize) -> usize {
        (warm as u128 * self.density as u128 / DENSE as u128) as usize
    }

    /// A mapping of `len` bytes was queued.
    pub fn note_queued(&mut self, len: usize) {
        self.unread_bytes = self.unread_bytes.saturating_add(len);
        self.unread_count = self.unread_count.saturating_add(1);
    }

    fn read_usage<O: Os>(&mut self, os: &O, u: Usage, queued_bytes: usize) {
        self.rss_last = u.resident;
        // One read where the system answers both (macOS's `task_info`).
        self.rss_peak = u.peak.or_else(|| os.peak_resident()).unwrap_or(0);
        if queued_bytes == 0 || u.resident < self.rss_base {
            self.rss_base = u.resident;
        }
        match os.address_space_limit() {
            Some(limit) => {
                let room = limit.saturating_sub(u.size.saturating_sub(queued_bytes));
                self.as_cap = AS_QUEUE_MAX.min(room >> AS_ROOM_SHIFT);
                self.as_room = room;
                self.as_limited = true;
            }
            None => self.unlimited(),
        }
    }

    /// No `RLIMIT_AS`: nothing queued is held against one.
    fn unlimited(&mut self) {
        self.as_cap = usize::MAX;
        self.as_limited = false;
        self.as_room = usize::MAX;
    }

    /// The program made as many mappings of its own as the last count
    /// allowed: counts the mappings now (`queued` of them queued). Answers
    /// the count cap, and how many more the program may make before the
    /// next count: a quarter of the room left (where the queue is of no
    /// use there, half the count, as between deferrals); where there is no
    /// limit, never; where the count cannot be read, after the most
    /// deferral candidates a failed count waits for.
    pub fn count_maps_now<O: Os>(&mut self, os: &O, queued: usize) -> (usize, usize) {
        if self.map_limit == 0 {
            return (self.entries_cap, usize::MAX);
        }
        let before = self.unreadable;
        self.until_map_check = 0;
        self.check_map_count(os, queued);
        let allowed = if self.unreadable != before {
            MAX_BACKOFF
        } else {
            self.map_recount
        };
        (self.entries_cap, allowed)
    }

    fn check_map_count<O: Os>(&mut self, os: &O, queued: usize) {
        // The countdown first, the common answer: it is set above 0 only
        // below, under a limit, and `start`, the one change of the limit
        // to none, sets it to 0.
        if self.until_map_check > 0 {
            self.until_map_check -= 1;
            return;
        }
        if self.map_limit == 0 {
            return;
        }
        // Not due again for a while even if this read never returns (a
        // signal handler that longjmps out of the hook): a read that is
        // interrupted every time must not be retried on every call. The
        // fence keeps the store before the read.
        self.until_map_check = self.map_backoff.max(MAP_CHECK_MIN);
        compiler_fence(SeqCst);
        let Some(count) = os.map_count() else {
            // Unreadable (no /proc): tried less and less often; the count
            // cap stays as it was (at most the configured one).
            self.unreadable += 1;
            self.map_backoff =
                (self.map_backoff.saturating_mul(2)).clamp(MAP_CHECK_MIN, MAX_BACKOFF);
            self.until_map_check = self.map_backoff;
            return;
        };
        let room = self.map_limit.saturating_sub(count.saturating_sub(queued));
        self.entries_cap = self.max_entries.min(room >> MAP_ROOM_SHIFT);
        // A count costs in proportion to the mappings (the kernel formats
        // a line for each): the next one waits at least half as many
        // deferral candidates as there are mappings, which keeps the
        // counting a small part of what the deferrals save however close
        // to the limit the process is. Where the room left is too small
        // for the queue to be of use, the wait doubles at each count
        // finding so (nothing is queued meanwhile, so nothing can be lost
        // by counting late).
        // The program's own mappings count again after a quarter of the
        // room (at least `MAP_CHECK_MIN`, which is within three quarters of
        // any room the queue is of use in), or where it is of no use, after
        // half the count, as the deferrals do.
        if self.entries_cap < MAP_USEFUL {
            self.map_backoff =
                (self.map_backoff.saturating_mul(2)).clamp(MAP_CHECK_MIN, MAX_BACKOFF);
            self.map_recount = count >> 1;
        } else {
            self.map_backoff = 0;
            self.map_recount = (room >> MAP_ROOM_SHIFT).max(MAP_CHECK_MIN);
        }
        self.until_map_check = MAP_CHECK_MIN
            .max(room >> 1)
            .max(count >> 1)
            .max(self.map_backoff);
    }

    /// After dropping the pages of `cooled` warm bytes that an RSS read
    /// just before found over budget, `warm` still warm: re-reads RSS; what
    /// the drop freed gives the density of warm mappings, and with it the
    /// baseline (RSS less the warm length at that density).
    pub fn after_cooling<O: Os>(&mut self, os: &O, cooled: usize, warm: usize) {
        let Some(u) = os.usage() else {
            return;
        };
        let freed = self.rss_last.saturating_sub(u.resident);
        if cooled > 0 {
            self.learn_density(freed, cooled);
        }
        self.rss_last = u.resident;
        self.rss_base = u.resident.saturating_sub(self.estimate(warm));
        self.unread_bytes = 0;
        self.unread_count = 0;
        self.refresh();
    }
}
