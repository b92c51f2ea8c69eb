//! The mapping table: every file mapping munmapq knows about, live (the
//! program owns it) or queued (the program unmapped it, munmapq has not yet).
//!
//! Fixed capacity, no allocation, `const` constructible so it can live in a
//! `static`. Three indexes over one slot array, and one guess:
//! - `by_addr`: slot numbers sorted by start address (entries never overlap),
//!   for exact and overlap look-ups in O(log n);
//! - `buckets`: a hash of queued slots by [`FileKey`], for O(1) reuse;
//! - a doubly linked FIFO of queued slots, oldest first, for eviction;
//! - `start_hints`: by a hash of a start address, the slot last inserted
//!   there, checked against the slot before it is believed: the exact
//!   look-up every munmap makes, usually without the search.

mod evict;
pub use evict::Evict;

/// Most mappings the table can hold, live and queued together.
pub const SLOTS: usize = 16384;
const KEY_BUCKETS: usize = 4096;
/// Hints from a start address to the slot last inserted there (see
/// [`Table::find`]); a power of two.
const START_HINTS: usize = 4096;
/// "No slot". Slot numbers start at 1 (`slots[0]` is never used) so that
/// "none" is 0 and a new table is all zero bytes: a `static` of it then
/// sits in `.bss` (no file bytes, no page touched until used) instead of
/// making libmunmapq a megabyte larger in `.data`.
const NIL: u16 = 0;

use crate::file::FileStamp;

use core::sync::atomic::{compiler_fence, Ordering::SeqCst};

/// What a queued mapping can be reused for: the same file, offset and
/// (page-rounded) length, while the file still reports the `stamp` it had
/// when the mapping was made. The window (`dev`, `ino`, `mnt`, `off`,
/// `len`) chooses the hash bucket; a queued mapping of the same window with
/// another stamp is stale (see [`Lookup::Stale`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FileKey {
    pub dev: u64,
    pub ino: u64,
    /// The mount it was mapped through (see [`crate::file::FileFacts`]).
    pub mnt: u64,
    pub off: u64,
    pub len: usize,
    /// The name it was mapped through, where the file has several (see
    /// [`crate::file::FileFacts::name`]).
    pub name: u64,
    /// The call's context (mount flags, personality) as
    /// [`crate::context::MmapContext::now`] tells it: compared as the
    /// stamp is, so a queued mapping made under another context is stale.
    pub ctx: u64,
    pub stamp: FileStamp,
}

/// What [`Table::take_queued`] found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Lookup {
    /// A queued mapping of the key, now live again, at this address.
    Hit(usize),
    /// A queued mapping of the same window made when the file reported
    /// another stamp: the file changed since, so it must not be handed
    /// back. Still in the table; the caller unmaps and removes it.
    Stale(Entry),
    Miss,
}

impl FileKey {
    const NONE: FileKey = FileKey {
        dev: 0,
        ino: 0,
        mnt: 0,
        off: 0,
        len: 0,
        name: 0,
        ctx: 0,
        stamp: FileStamp {
            size: 0,
            mtime_sec: 0,
            mtime_nsec: 0,
            ctime_sec: 0,
            ctime_nsec: 0,
        },
    };

    fn same_window(&self, other: &FileKey) -> bool {
        (self.dev, self.ino, self.mnt, self.name, self.off, self.len)
            == (
                other.dev, other.ino, other.mnt, other.name, other.off, other.len,
            )
    }

    /// The file's identity ([`crate::readonly_fds::identity`]).
    pub fn identity(&self) -> u64 {
        crate::readonly_fds::identity_of(self.dev, self.ino, self.mnt)
    }

    fn bucket(&self) -> usize {
        bucket_of(self.identity(), self.off, self.len)
    }
}

/// The bucket of the window at `off`, `len` of the file with identity
/// `id`: of the window only (not the stamp, so a stale mapping of the
/// window is found and dropped; the mount is the identity's, which a
/// stale mapping shares). The identity is a mix of the file's words, and
/// a multiply spreads the offset and length into the top bits, which
/// choose among the buckets (a power of two). Taking the identity lets an
/// mmap that worked it out already for its descriptor's record hash the
/// window with two multiplies.
#[inline(always)]
fn bucket_of(id: u64, off: u64, len: usize) -> usize {
    let h = (id ^ off).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let h = (h ^ len as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    (h >> (64 - KEY_BUCKETS.trailing_zeros())) as usize
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum State {
    Free,
    Live,
    Queued,
    Evicting,
}

/// A table entry as callers see it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Entry {
    pub slot: u16,
    pub start: usize,
    pub len: usize,
    pub state: State,
    /// The contention epoch when it was inserted (see `crate::dirty`).
    pub epoch: u64,
    /// The descriptor it was mapped through while the program keeps it
    /// open; [`NO_FD`] once the program closed it.
    pub fd: i32,
}

/// An entry's descriptor after the program closed it.
pub const NO_FD: i32 = -1;

/// In a slot's `fd1`: the program closed that descriptor (the entry has
/// [`NO_FD`]).
const DETACHED: u32 = 1 << 31;

impl Entry {
    pub fn end(&self) -> usize {
        self.start + self.len
    }
}

#[derive(Clone, Copy)]
struct Slot {
    start: usize,
    len: usize,
    key: FileKey,
    state: State,
    epoch: u64,
    /// The descriptor plus one (0: [`NO_FD`]), so that an empty slot is
    /// all zero bytes.
    fd1: u32,
    /// When it was queued (a counter of enqueues): its age, for eviction.
    seq: u64,
    /// Queued: how much of it, at its end, may still hold pages (its pages
    /// before that were dropped since it was queued, see
    /// [`Table::cool_by_age`]); 0: cold.
    warm: usize,
    older: u16,
    newer: u16,
    /// Next slot in the same key bucket, or in the free list.
    next: u16,
    /// `key.bucket()`, worked out once when the entry is made (the key
    /// never changes while it exists).
    bucket: u16,
}

impl Slot {
    fn fd(&self) -> i32 {
        if self.fd1 & DETACHED != 0 {
            return NO_FD;
        }
        self.fd1.wrapping_sub(1) as i32
    }

    const EMPTY: Slot = Slot {
        start: 0,
        len: 0,
        key: FileKey::NONE,
        state: State::Free,
        epoch: 0,
        fd1: 0,
        seq: 0,
        warm: 0,
        older: NIL,
        newer: NIL,
        next: NIL,
        bucket: 0,
    };
}

pub struct Table {
    /// Indexed by slot number, 1 to `SLOTS`.
    slots: [Slot; SLOTS + 1],
    by_addr: [u16; SLOTS],
    /// By a hash of a start address, the slot last inserted at an address
    /// of that hash: a guess [`Table::find`] checks against the slot
    /// itself, never an answer on its own. Entries removed or moved on
    /// leave their hint behind; it then fails the check.
    start_hints: [u16; START_HINTS],
    used: usize,
    free: u16,
    fresh: usize,
    buckets: [u16; KEY_BUCKETS],
    oldest: u16,
    newest: u16,
    queued: usize,
    queued_bytes: usize,
    /// Length of the queued entries whose pages were not dropped since they
    /// were queued: all the queue's resident memory is in them.
    warm_bytes: usize,
    enqueues: u64,
    /// Munmaps [`Table::mark_by_age`] has asked for so far.
    aged_munmaps: u64,
    /// Page drops [`Table::cool_by_age`] has made so far.
    cooling_drops: u64,
    /// The range being unmapped right now (empty: none), for a recovery
    /// after a longjmp out of that very unmap: it may or may not be done.
    in_flight: (usize, usize),
    /// Entries whose descriptor the program has not closed, and while
    /// there are at most [`FD_SET`] of them (since there were none), their
    /// slots: a close then finds them without a walk of the table. A
    /// program that maps a file and closes it at once, as git does each
    /// loose object, has one at a time.
    with_fd: usize,
    fd_slots: [u16; FD_SET],
    fd_overflow: bool,
}

/// Entries with an open descriptor listed (see `Table::fd_slots`).
const FD_SET: usize = 16;

impl Default for Table {
    fn default() -> Self {
        Self::new()
    }
}

impl Table {
    pub const fn new() -> Self {
        Table {
            slots: [Slot::EMPTY; SLOTS + 1],
            by_addr: [0; SLOTS],
            start_hints: [NIL; START_HINTS],
            used: 0,
            free: NIL,
            fresh: 0,
            buckets: [NIL; KEY_BUCKETS],
            oldest: NIL,
            newest: NIL,
            queued: 0,
            queued_bytes: 0,
            warm_bytes: 0,
            enqueues: 0,
            aged_munmaps: 0,
            cooling_drops: 0,
            in_flight: (0, 0),
            with_fd: 0,
            fd_slots: [NIL; FD_SET],
            fd_overflow: false,
        }
    }

    /// Calls `unmap(start, len)` with `[start, start + len)` marked as in
    /// flight (see [`Table::take_each_unmappable_slot`]).
    pub fn unmap_in_flight(&mut self, start: usize, len: usize, unmap: impl FnOnce()) {
        self.in_flight = (start, start + len);
        compiler_fence(SeqCst);
        unmap();
        compiler_fence(SeqCst);
    }

    /// The unmap marked in flight is over and its entries are gone.
    pub fn finish_unmap(&mut self) {
        compiler_fence(SeqCst);
        self.in_flight = (0, 0);
    }

    /// For every slot whose own state says it is still munmapq's to unmap
    /// (queued, or marked for eviction) and that is not in an unmap in
    /// flight: frees it, then calls `f(start, len)`. Reads nothing but the
    /// slot array (and the count of slots ever used): for a table whose
    /// holder was interrupted half-way, whose indexes may be torn while each
    /// slot's state is not.
    pub fn take_each_unmappable_slot(&mut self, mut f: impl FnMut(usize, usize)) {
        let (fly_start, fly_end) = self.in_flight;
        // Slots are numbered from 1 (0 is "none").
        for i in 1..=self.fresh.min(SLOTS) {
            let s = &mut self.slots[i];
            let sane = s.len > 0 && s.start.checked_add(s.len).is_some();
            let ours = matches!(s.state, State::Queued | State::Evicting);
            let flying = s.start < fly_end && fly_start < s.start.wrapping_add(s.len);
            if sane && ours && !flying {
                s.state = State::Free;
                let (start, len) = (s.start, s.len);
                compiler_fence(SeqCst);
                f(start, len);
            }
        }
    }

    /// Forgets everything (the mappings themselves are left alone).
    pub fn clear(&mut self) {
        // Slots keep their states here: the hints to them go too.
        self.start_hints = [NIL; START_HINTS];
        self.used = 0;
        self.free = NIL;
        self.fresh = 0;
        self.buckets = [NIL; KEY_BUCKETS];
        self.oldest = NIL;
        self.newest = NIL;
        self.queued = 0;
        self.queued_bytes = 0;
        self.warm_bytes = 0;
        self.in_flight = (0, 0);
        self.with_fd = 0;
        self.fd_overflow = false;
    }

    pub fn len(&self) -> usize {
        self.used
    }

    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    pub fn is_full(&self) -> bool {
        self.used == SLOTS
    }

    pub fn queued(&self) -> usize {
        self.queued
    }

    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// Queued length whose pages were not dropped since it was queued.
    pub fn warm_bytes(&self) -> usize {
        self.warm_bytes
    }

    fn entry(&self, slot: u16) -> Entry {
        let s = &self.slots[slot as usize];
        Entry {
            slot,
            start: s.start,
            len: s.len,
            state: s.state,
            epoch: s.epoch,
            fd: s.fd(),
        }
    }

    /// Position in `by_addr` of the first entry starting at or after `addr`.
    fn lower_bound(&self, addr: usize) -> usize {
        let (mut lo, mut hi) = (0, self.used);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.slots[self.by_addr[mid] as usize].start < addr {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The lowest start and highest end of all entries (None if empty).
    pub fn extent(&self) -> Option<(usize, usize)> {
        if self.used == 0 {
            return None;
        }
        let first = &self.slots[self.by_addr[0] as usize];
        let last = &self.slots[self.by_addr[self.used - 1] as usize];
        Some((first.start, last.start + last.len))
    }

    /// The entry that starts exactly at `addr`: the slot its hint names
    /// if that slot is in use and starts there (in-use slots are exactly
    /// the indexed entries, which never share a start), else by a search
    /// of the address order.
    /// The two ways meet at a slot number, in a register, before the
    /// entry is read.
    #[inline(always)]
    pub fn find(&self, addr: usize) -> Option<Entry> {
        let hinted = self.start_hints[start_hint(addr)];
        let s = &self.slots[hinted as usize];
        let slot = if hinted != NIL && s.state != State::Free && s.start == addr {
            hinted
        } else {
            self.find_in_order(addr)
        };
        (slot != NIL).then(|| self.entry(slot))
    }

    /// [`Table::find`] where the hint missed: a search of the address
    /// order, answering the slot (NIL: none).
    #[inline(never)]
    fn find_in_order(&self, addr: usize) -> u16 {
        let pos = self.lower_bound(addr);
        if pos < self.used && self.slots[self.by_addr[pos] as usize].start == addr {
            self.by_addr[pos]
        } else {
            NIL
        }
    }

    /// The highest-addressed entry overlapping `[start, end)`. Entries never
    /// overlap each other, so calling this until it answers `None`, removing
    /// what it returns, visits every overlapping entry.
    pub fn last_overlap(&self, start: usize, end: usize) -> Option<Entry> {
        let pos = self.lower_bound(end);
        if pos == 0 {
            return None;
        }
        let e = self.entry(self.by_addr[pos - 1]);
        (e.end() > start).then_some(e)
    }

    /// Whether a queued entry inserted at or before `epoch` overlaps
    /// `[start, end)`.
    pub fn queued_overlaps(&self, start: usize, end: usize, epoch: u64) -> bool {
        let mut hi = end;
        while let Some(e) = self.last_overlap(start, hi) {
            if e.state == State::Queued && e.epoch <= epoch {
                return true;
            }
            hi = e.start;
        }
        false
    }

    /// What the entry in `slot` maps (`FileKey::NONE`'s zeros if it is
    /// free).
    pub fn key(&self, slot: u16) -> &FileKey {
        &self.slots[slot as usize].key
    }

    /// The lowest-addressed entry starting at or after `addr`.
    pub fn first_from(&self, addr: usize) -> Option<Entry> {
        let pos = self.lower_bound(addr);
        (pos < self.used).then(|| self.entry(self.by_addr[pos]))
    }

    /// Adds a live mapping. The caller has removed anything overlapping it.
    /// Answers false when the table is full.
    pub fn insert_live(
        &mut self,
        start: usize,
        len: usize,
        key: FileKey,
        epoch: u64,
        fd: i32,
    ) -> bool {
        let slot = if self.free != NIL {
            let s = self.free;
            self.free = self.slots[s as usize].next;
            s
        } else if self.fresh < SLOTS {
            self.fresh += 1;
            self.fresh as u16
        } else {
            return false;
        };
        self.slots[slot as usize] = Slot {
            start,
            len,
            key,
            state: State::Live,
            epoch,
            fd1: (fd as u32).wrapping_add(1),
            bucket: key.bucket() as u16,
            ..Slot::EMPTY
        };
        self.start_hints[start_hint(start)] = slot;
        if fd != NO_FD {
            self.list_fd(slot);
        }
        let pos = self.lower_bound(start);
        self.by_addr.copy_within(pos..self.used, pos + 1);
        self.by_addr[pos] = slot;
        self.used += 1;
        true
    }

    /// The first entry at or after position `pos` of the address order
    /// whose descriptor is in `[lo, hi]`, with its position.
    /// While the entries with a descriptor are listed, any of them (`pos`
    /// is not used, and answered 0): the caller takes each one's descriptor
    /// away before it asks again.
    pub fn next_with_fd(&self, mut pos: usize, lo: i32, hi: i32) -> Option<(usize, Entry)> {
        if !self.fd_overflow {
            return self.fd_slots[..self.with_fd]
                .iter()
                .find(|&&slot| {
                    let fd = self.slots[slot as usize].fd();
                    lo <= fd && fd <= hi
                })
                .map(|&slot| (0, self.entry(slot)));
        }
        while pos < self.used {
            let slot = self.by_addr[pos];
            let fd = self.slots[slot as usize].fd();
            if fd != NO_FD && lo <= fd && fd <= hi {
                return Some((pos, self.entry(slot)));
            }
            pos += 1;
        }
        None
    }

    /// The program closed the descriptor `slot` was mapped through.
    pub fn orphan(&mut self, slot: u16) {
        if self.unlist_fd(slot) {
            self.slots[slot as usize].fd1 |= DETACHED;
        }
    }

    /// Lists `slot` among the entries with an open descriptor.
    fn list_fd(&mut self, slot: u16) {
        if self.with_fd < FD_SET && !self.fd_overflow {
            self.fd_slots[self.with_fd] = slot;
        } else {
            self.fd_overflow = true;
        }
        self.with_fd += 1;
    }

    /// Takes `slot` off the entries with an open descriptor; whether it was
    /// one of them (it has a descriptor, not detached).
    fn unlist_fd(&mut self, slot: u16) -> bool {
        let fd1 = self.slots[slot as usize].fd1;
        if fd1 == 0 || fd1 & DETACHED != 0 {
            return false;
        }
        if !self.fd_overflow {
            let n = self.with_fd;
            if let Some(i) = self.fd_slots[..n].iter().position(|&s| s == slot) {
                self.fd_slots[i] = self.fd_slots[n - 1];
            }
        }
        self.with_fd -= 1;
        if self.with_fd == 0 {
            self.fd_overflow = false;
        }
        true
    }

    /// An entry of file `(dev, ino)`, one at a time (the caller removes
    /// each before asking again).
    pub fn entry_of_file(&self, dev: u64, ino: u64) -> Option<Entry> {
        (0..self.used)
            .map(|i| self.by_addr[i])
            .find(|&slot| {
                let s = &self.slots[slot as usize];
                s.key.dev == dev && s.key.ino == ino
            })
            .map(|slot| self.entry(slot))
    }

    /// Removes an entry from every index and frees its slot.
    pub fn remove(&mut self, slot: u16) {
        let start = self.slots[slot as usize].start;
        let pos = self.lower_bound(start);
        debug_assert_eq!(self.by_addr[pos], slot);
        self.by_addr.copy_within(pos + 1..self.used, pos);
        self.used -= 1;
        self.detach(slot);
        self.release_slot(slot);
    }

    fn release_slot(&mut self, slot: u16) {
        self.unlist_fd(slot);
        self.slots[slot as usize].fd1 = 0;
        let s = &mut self.slots[slot as usize];
        s.state = State::Free;
        s.next = self.free;
        self.free = slot;
    }

    /// Takes a queued slot out of the FIFO and its key bucket; it becomes
    /// live.
    fn detach(&mut self, slot: u16) {
        self.detach_as(slot, State::Live);
    }

    /// The same, leaving it in `state` (one store: a recovery never sees a
    /// queued mapping as live, see `Engine::recover_abandoned`).
    fn detach_as(&mut self, slot: u16, state: State) {
        let s = &self.slots[slot as usize];
        if s.state != State::Queued {
            return;
        }
        let (next, b) = (s.next, s.bucket as usize);
        let mut link = self.buckets[b];
        if link == slot {
            self.buckets[b] = next;
        } else {
            while link != NIL {
                let after = self.slots[link as usize].next;
                if after == slot {
                    self.slots[link as usize].next = next;
                    break;
                }
                link = after;
            }
        }
        self.leave_fifo(slot, state);
    }

    /// Takes the queued `slot`, out of its key bucket already, out of the
    /// FIFO, leaving it in `state`.
    #[inline(always)]
    fn leave_fifo(&mut self, slot: u16, state: State) {
        let s = &self.slots[slot as usize];
        let (older, newer) = (s.older, s.newer);
        let (len, warm) = (s.len, s.warm);
        match older {
            NIL => self.oldest = newer,
            o => self.slots[o as usize].newer = newer,
        }
        match newer {
            NIL => self.newest = older,
            n => self.slots[n as usize].older = older,
        }
        self.queued -= 1;
        self.queued_bytes -= len;
        self.warm_bytes -= warm;
        self.slots[slot as usize].state = state;
    }

    /// Live -> queued: the program unmapped it, munmapq keeps it.
    pub fn enqueue(&mut self, slot: u16) {
        // Already below KEY_BUCKETS (`FileKey::bucket` keeps that many
        // top bits): masked, the index needs no bounds check.
        let b = self.slots[slot as usize].bucket as usize & (KEY_BUCKETS - 1);
        let newest = self.newest;
        let s = &mut self.slots[slot as usize];
        debug_assert_eq!(s.state, State::Live);
        s.state = State::Queued;
        s.seq = self.enqueues;
        s.warm = s.len;
        s.older = newest;
        s.newer = NIL;
        s.next = self.buckets[b];
        let len = s.len;
        self.buckets[b] = slot;
        match newest {
            NIL => self.oldest = slot,
            n => self.slots[n as usize].newer = slot,
        }
        self.newest = slot;
        self.enqueues += 1;
        self.queued += 1;
        self.queued_bytes += len;
        self.warm_bytes += len;
    }

    /// Queued -> live for a mapping of `key` made through the descriptor
    /// `through` while it stayed open (made through any, with None),
    /// answering its address; or a stale queued mapping of the same
    /// window, left for the caller. A mapping holds the open file
    /// description it was made through: handed to a mmap through another
    /// description of the file, it would keep the first one open past its
    /// last close (its locks, its close event), and leave the second's
    /// last close at its own close.
    pub fn take_queued(&mut self, key: &FileKey, through: Option<i32>) -> Lookup {
        self.take_queued_of(key, key.identity(), through)
    }

    /// [`Table::take_queued`], for a caller that has the key's identity
    /// (`id`, [`FileKey::identity`]) at hand.
    #[inline(always)]
    pub fn take_queued_of(&mut self, key: &FileKey, id: u64, through: Option<i32>) -> Lookup {
        debug_assert_eq!(id, key.identity());
        let fd1 = through.map(|fd| (fd as u32).wrapping_add(1));
        let bucket = bucket_of(id, key.off, key.len);
        let mut before = NIL;
        let mut link = self.buckets[bucket];
        while link != NIL {
            let s = &self.slots[link as usize];
            if s.key == *key {
                if fd1.is_none() || fd1 == Some(s.fd1) {
                    let (start, next) = (s.start, s.next);
                    // Every slot in a bucket's chain is queued: out of the
                    // chain, where the walk knows what comes before it.
                    debug_assert_eq!(s.state, State::Queued);
                    match before {
                        NIL => self.buckets[bucket] = next,
                        b => self.slots[b as usize].next = next,
                    }
                    self.leave_fifo(link, State::Live);
                    return Lookup::Hit(start);
                }
            } else if s.key.same_window(key) {
                return Lookup::Stale(self.entry(link));
            }
            before = link;
            link = s.next;
        }
        Lookup::Miss
    }

    #[cfg(test)]
    pub fn oldest_queued(&self) -> Option<Entry> {
        (self.oldest != NIL).then(|| self.entry(self.oldest))
    }

    /// The queued entry in `slot` had its pages dropped (`dropped`): it is
    /// cold; or the drop failed: it is marked for eviction. Answers the warm
    /// length that went (0 if it was cold already).
    fn cool_or_mark(&mut self, slot: u16, dropped: bool) -> usize {
        let s = &mut self.slots[slot as usize];
        if s.state != State::Queued {
            return 0;
        }
        let warm = s.warm;
        if dropped {
            s.warm = 0;
            self.warm_bytes -= warm;
        } else {
            self.detach_as(slot, State::Evicting);
        }
        warm
    }

    /// Drops the pages of the first `len` bytes (a whole number of pages) of
    /// the warm part of the queued entry in `slot` with `drop`; answers the
    /// warm length that cooled. A drop that failed may have left part of
    /// the range changed (macOS drops by `mprotect` to `PROT_NONE` and
    /// back): the entry is marked for eviction, never handed out again, and
    /// its whole warm length counts as gone.
    fn cool_part(
        &mut self,
        slot: u16,
        len: usize,
        drop: &mut dyn FnMut(usize, usize) -> bool,
    ) -> usize {
        let s = self.slots[slot as usize];
        let len = len.min(s.warm);
        if s.state != State::Queued || len == 0 {
            return 0;
        }
        if !drop(s.start + s.len - s.warm, len) {
            return self.cool_or_mark(slot, false);
        }
        self.slots[slot as usize].warm -= len;
        self.warm_bytes -= len;
        len
    }

    /// Page drops made by [`Table::cool_by_age`] so far.
    pub fn cooling_drops(&self) -> u64 {
        self.cooling_drops
    }

    /// Deferrals so far.
    pub fn enqueues(&self) -> u64 {
        self.enqueues
    }
}

/// The hint a start address has: the product's top bits, which every bit
/// of the address moves (its low bits, zero in a page-aligned start, do
/// not matter).
fn start_hint(addr: usize) -> usize {
    ((addr as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - START_HINTS.trailing_zeros()))
        as usize
}

#[cfg(test)]
mod tests;
