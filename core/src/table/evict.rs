//! Which queued mappings a flush unmaps: the policies of `MUNMAPQ_EVICT`
//! and the marking they are made of. Over the count or length caps:
//! - `aged` (the default): the least recently unmapped, until the queue is
//!   at 15/16 of its caps, each unmapped together with its touching queued
//!   neighbours that are old enough: among the oldest 7/8 of the queued
//!   bytes, and older still where that is needed to stay within a budget of
//!   one eviction munmap per 64 deferred munmaps. Windows younger than that
//!   stay, so a flush frees little and costs few munmaps.
//! - `oldest`: the least recently unmapped, each together with every queued
//!   mapping touching it (one munmap each), until the queue is at 3/4 of
//!   its caps.
//! - `all`: everything.
//!
//! Over the resident budget, [`Table::cool_by_age`] drops the oldest warm
//! mappings' pages; a run whose pages could not be dropped is marked for
//! eviction instead.
//!
//! The policies only mark entries; [`Table::evict_marked`] unmaps each run
//! of marked entries with one munmap.

use super::{State, Table, NIL};

/// How a full queue is evicted (`MUNMAPQ_EVICT`; see the module's text).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Evict {
    /// The least recently unmapped, each with every queued mapping touching
    /// it, down to 3/4 of the caps.
    Oldest,
    /// The least recently unmapped down to 15/16 of the caps, each with its
    /// touching queued neighbours that are old themselves, within a budget
    /// of munmaps: keeps the young windows that `Oldest` throws out with
    /// their old neighbours.
    Aged,
    /// Everything queued.
    All,
}

/// What a piece of [`Table::old_pieces`] is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pieces {
    /// Unmapping: every entry of a piece is old enough.
    Evict,
    /// Dropping pages: warm entries are wanted, cold ones only join.
    Cool,
}

/// What [`Table::old_pieces`] does with the pieces it finds.
enum Act<'a> {
    /// Counts pieces of that kind.
    Count(Pieces),
    /// Marks eviction pieces for [`Table::evict_marked`].
    Mark,
    /// Drops each cooling piece's pages with the function.
    Drop(&'a mut dyn FnMut(usize, usize) -> bool),
}

impl Act<'_> {
    fn kind(&self) -> Pieces {
        match self {
            Act::Count(kind) => *kind,
            Act::Mark => Pieces::Evict,
            Act::Drop(_) => Pieces::Cool,
        }
    }
}

/// With [`Evict::Aged`], eviction munmaps are budgeted at one per this many
/// deferred munmaps, at least one per flush.
const DEFERRED_PER_EVICTION_MUNMAP: u64 = 64;

impl Table {
    /// Marks what `policy` evicts so that one more mapping of `len` bytes
    /// fits under `entries` queued mappings and `bytes` queued bytes.
    pub fn mark_to_fit(&mut self, policy: Evict, entries: usize, bytes: usize, len: usize) {
        let (max_n, max_b) = (entries, bytes);
        match policy {
            Evict::All => self.mark_all(),
            Evict::Aged => {
                // Only down to 15/16 of the caps: each flush frees little, so
                // young windows stay.
                let (low_n, low_b) = (max_n - max_n / 16, max_b - max_b / 16);
                let (qn, qb) = (self.queued(), self.queued_bytes());
                let bytes = qb
                    .saturating_sub(low_b)
                    .max((qb + len).saturating_sub(max_b));
                let count = (qn + 1).saturating_sub(low_n.max(1));
                self.mark_by_age(bytes, count, qb / 8 * 7, DEFERRED_PER_EVICTION_MUNMAP);
            }
            Evict::Oldest => {
                let (low_n, low_b) = (max_n - max_n / 4, max_b - max_b / 4);
                while (self.queued() >= low_n.max(1)
                    || self.queued_bytes() > low_b
                    || self.queued_bytes() + len > max_b)
                    && self.mark_oldest_run() > 0
                {}
            }
        }
    }

    /// Marks the oldest queued entry and every queued entry touching it, on
    /// either side, transitively: one run of address space that a single
    /// munmap frees. Answers how many were marked.
    pub fn mark_oldest_run(&mut self) -> usize {
        let slot = self.oldest;
        if slot == NIL {
            return 0;
        }
        let pos = self.lower_bound(self.slots[slot as usize].start);
        // Is the entry at `next` queued and does it start where `at` ends?
        let joins = |t: &Table, at: usize, next: usize| {
            let (a, b) = (
                &t.slots[t.by_addr[at] as usize],
                &t.slots[t.by_addr[next] as usize],
            );
            let (left, right) = if at < next { (a, b) } else { (b, a) };
            b.state == State::Queued && left.start + left.len == right.start
        };
        let (mut lo, mut hi) = (pos, pos);
        while lo > 0 && joins(self, lo, lo - 1) {
            lo -= 1;
        }
        while hi + 1 < self.used && joins(self, hi, hi + 1) {
            hi += 1;
        }
        for i in lo..=hi {
            let s = self.by_addr[i];
            self.detach_as(s, State::Evicting);
        }
        hi + 1 - lo
    }

    /// The age (enqueue number) of the youngest of the oldest queued entries
    /// that together hold at least `bytes` bytes and `count` entries (at
    /// least one); `None` when nothing is queued.
    fn age_cutoff(&self, bytes: usize, count: usize) -> Option<u64> {
        let (mut slot, mut freed, mut n, mut last) = (self.oldest, 0, 0, None);
        while slot != NIL && (freed < bytes || n < count || last.is_none()) {
            let s = &self.slots[slot as usize];
            freed += s.len;
            n += 1;
            last = Some(s.seq);
            slot = s.newer;
        }
        last
    }

    /// In each run of touching queued entries, the pieces of consecutive
    /// entries queued at or before `may` that hold an entry queued at or
    /// before `must`: what evicting the `must`-old entries with their
    /// `may`-old neighbours unmaps. With [`Pieces::Cool`] only warm entries
    /// are wanted, and cold ones of any age join a piece (dropping their
    /// pages again costs nothing but the call's length). Answers how many
    /// pieces there are (one system call each) and does with them what
    /// `act` says: nothing, marks them for eviction, or drops each piece's
    /// pages and makes its entries cold, or marks them for eviction where
    /// that failed (then the second number is the warm length cooled or
    /// marked).
    fn old_pieces(&mut self, must: u64, may: u64, mut act: Act) -> (usize, usize) {
        let cool = act.kind() == Pieces::Cool;
        let joins =
            |s: &super::Slot| s.state == State::Queued && (s.seq <= may || cool && s.warm == 0);
        let wanted = |s: &super::Slot| s.seq <= must && !(cool && s.warm == 0);
        let (mut pieces, mut cooled, mut i) = (0, 0, 0);
        while i < self.used {
            let first = self.slots[self.by_addr[i] as usize];
            if !joins(&first) {
                i += 1;
                continue;
            }
            // A piece: queued, touching, all old enough (or cold).
            let (mut j, mut end, mut has_must) = (i + 1, first.start + first.len, wanted(&first));
            while j < self.used {
                let s = self.slots[self.by_addr[j] as usize];
                if s.start != end || !joins(&s) {
                    break;
                }
                end += s.len;
                has_must |= wanted(&s);
                j += 1;
            }
            if has_must {
                pieces += 1;
                match &mut act {
                    Act::Count(_) => {}
                    Act::Mark => {
                        for k in i..j {
                            let slot = self.by_addr[k];
                            self.detach_as(slot, State::Evicting);
                        }
                    }
                    Act::Drop(drop) => {
                        let dropped = drop(first.start, end - first.start);
                        for k in i..j {
                            cooled += self.cool_or_mark(self.by_addr[k], dropped);
                        }
                    }
                }
            }
            i = j;
        }
        (pieces, cooled)
    }

    /// The smallest age from `old` on up to which merging neighbours into
    /// the pieces of `kind` keeps them within `max` (the newest age if
    /// none does).
    fn merge_age(&mut self, must: u64, old: u64, kind: Pieces, max: usize) -> u64 {
        let (mut lo, mut hi) = (old, self.slots[self.newest as usize].seq);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.old_pieces(must, mid, Act::Count(kind)).0 <= max {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }

    /// Drops the pages of the oldest warm queued entries holding at least
    /// `bytes` bytes, the mappings staying queued, in at most `max_drops`
    /// calls of `drop(start, len)` (at least one): touching queued
    /// neighbours join a call, cold ones of any age, warm ones from the
    /// oldest on as far as needed to stay within the calls. The youngest
    /// entry needed may lose only part of its pages (whole pages of
    /// `page` bytes, one more call): one window larger than the budget
    /// keeps what the budget allows. This is a cache's eviction: the young
    /// windows, the likeliest to be reused soon, keep their pages. A run
    /// whose drop failed is marked for eviction ([`Table::evict_marked`]):
    /// its pages may be left inaccessible (macOS drops them by
    /// `mprotect`), and it must never be handed out again. Answers the warm
    /// length cooled or marked.
    pub fn cool_by_age(
        &mut self,
        bytes: usize,
        max_drops: usize,
        page: usize,
        drop: &mut dyn FnMut(usize, usize) -> bool,
    ) -> usize {
        let (must, part) = self.warm_cutoff(bytes);
        let mut cooled = 0;
        if let Some(must) = must {
            let calls = max_drops.max(1 + part.is_some() as usize) - part.is_some() as usize;
            let may = self.merge_age(must, must, Pieces::Cool, calls);
            let (pieces, c) = self.old_pieces(must, may, Act::Drop(&mut *drop));
            self.cooling_drops += pieces as u64;
            cooled += c;
        }
        if let Some((slot, len)) = part {
            let len = len.div_ceil(page.max(1)) * page.max(1);
            let c = self.cool_part(slot, len, drop);
            self.cooling_drops += (c > 0) as u64;
            cooled += c;
        }
        cooled
    }

    /// The oldest warm queued entries that together hold at least `bytes`
    /// warm bytes: the age of the youngest of those needed whole, and the
    /// youngest one if only part of it is needed (its slot, and how much).
    fn warm_cutoff(&self, bytes: usize) -> (Option<u64>, Option<(u16, usize)>) {
        let (mut slot, mut held, mut whole) = (self.oldest, 0, None);
        while slot != NIL && held < bytes {
            let s = &self.slots[slot as usize];
            if s.warm > 0 {
                if held + s.warm > bytes {
                    return (whole, Some((slot, bytes - held)));
                }
                held += s.warm;
                whole = Some(s.seq);
            }
            slot = s.newer;
        }
        (whole, None)
    }

    /// Marks by age: the oldest queued entries holding at least `bytes`
    /// bytes and `count` entries (at least one), and with them the touching
    /// queued neighbours that are old enough: among the oldest
    /// `merge_bytes`, or older still where that is needed to keep the
    /// munmaps this call asks for within the budget (one per `per_munmap`
    /// entries ever queued, less those asked for before; at least one).
    /// Entries younger than that stay. Answers how many munmaps the marked
    /// entries take.
    pub fn mark_by_age(
        &mut self,
        bytes: usize,
        count: usize,
        merge_bytes: usize,
        per_munmap: u64,
    ) -> usize {
        let Some(must) = self.age_cutoff(bytes, count) else {
            return 0;
        };
        let old = self.age_cutoff(merge_bytes, 0).unwrap_or(must).max(must);
        let max_runs = (self.enqueues / per_munmap)
            .saturating_sub(self.aged_munmaps)
            .max(1) as usize;
        let may = self.merge_age(must, old, Pieces::Evict, max_runs);
        let (n, _) = self.old_pieces(must, may, Act::Mark);
        self.aged_munmaps += n as u64;
        n
    }

    /// Marks the oldest queued entry for [`Table::evict_marked`].
    pub fn mark_oldest(&mut self) -> bool {
        let slot = self.oldest;
        if slot == NIL {
            return false;
        }
        self.detach_as(slot, State::Evicting);
        true
    }

    /// Marks every queued entry for [`Table::evict_marked`].
    pub fn mark_all(&mut self) {
        self.mark_up_to(usize::MAX);
    }

    /// Marks every queued entry of at most `len` bytes for
    /// [`Table::evict_marked`].
    pub fn mark_up_to(&mut self, len: usize) {
        let mut slot = self.oldest;
        while slot != NIL {
            // Read before the detach, which relinks its neighbours only.
            let s = self.slots[slot as usize];
            if s.len <= len {
                self.detach_as(slot, State::Evicting);
            }
            slot = s.newer;
        }
    }

    /// Removes every marked entry in one pass over the address index and
    /// calls `unmap` once per run of marked entries that touch each other.
    /// Each run stays marked until its unmap has returned (in flight while
    /// it runs), so that a recovery unmaps exactly the runs not yet begun.
    /// Answers how many entries were removed.
    pub fn evict_marked(&mut self, mut unmap: impl FnMut(usize, usize)) -> usize {
        let used = self.used;
        let mut kept = 0;
        let mut removed = 0;
        // (start, end, index of its first entry) of the run being gathered.
        let mut run: Option<(usize, usize, usize)> = None;
        for i in 0..used {
            let slot = self.by_addr[i];
            let s = self.slots[slot as usize];
            if s.state != State::Evicting {
                // Entries of a pending run sit at `kept..i`: unmap them
                // before `by_addr[kept]` is overwritten.
                if let Some(r) = run.take() {
                    self.unmap_run(r, i, &mut unmap);
                }
                self.by_addr[kept] = slot;
                kept += 1;
                continue;
            }
            removed += 1;
            run = match run {
                Some((start, end, first)) if end == s.start => {
                    Some((start, s.start + s.len, first))
                }
                Some(r) => {
                    self.unmap_run(r, i, &mut unmap);
                    Some((s.start, s.start + s.len, i))
                }
                None => Some((s.start, s.start + s.len, i)),
            };
        }
        if let Some(r) = run {
            self.unmap_run(r, used, &mut unmap);
        }
        self.used = kept;
        removed
    }

    /// Unmaps one run (its entries are `by_addr[first..past]`), then frees
    /// their slots.
    fn unmap_run(
        &mut self,
        (start, end, first): (usize, usize, usize),
        past: usize,
        unmap: &mut impl FnMut(usize, usize),
    ) {
        self.unmap_in_flight(start, end - start, || unmap(start, end - start));
        for j in first..past {
            self.release_slot(self.by_addr[j]);
        }
        self.finish_unmap();
    }
}
