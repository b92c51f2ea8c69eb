//! The calls after which the kernel does what it does at a file's last
//! close (close, dup2 onto an open descriptor, unlink, unmount).
//!
//! A queued mapping holds the open file it was made through: were it left
//! queued, the program's close would no longer be the last one, and locks,
//! leases, a deleted file's space, inotify's close events and unmounts
//! would wait for the queue. So before the real close, the queued mappings
//! made through that descriptor are really unmapped. A live one (the
//! program closed the descriptor before unmapping) would hold the
//! description, and any `flock`, OFD lock or lease on it, past the close
//! once its munmap is deferred, and it is the only thing that still holds
//! that open file: its munmap is the file's last close. So every live
//! mapping made through the descriptor is forgotten at the close (its
//! munmap goes to the kernel, as without munmapq), whatever lock it may
//! carry: no lock call is watched, as one can be taken where no hook
//! looks (the `syscall` instruction, a copy sent over a socket, a fork
//! child's inherited descriptor). The next whole-file small mapping
//! through a number whose close forgot one passes straight by
//! (`closes_first`): a program that
//! maps whole files and closes them before unmapping (git's loose objects)
//! would otherwise fill the payoff's window with mappings that cannot be
//! reused, and turn the queue off for the ones that can.
//!
//! The records are the process's descriptor table's: a hook running on
//! another ([`Os::fd_table`]: a vfork child, or after an unshare) neither
//! uses nor changes them.

use super::Engine;
use crate::close_seq::Place;
use crate::fds::FD_BITS;
use crate::os::{FdTable, Os};
use crate::payoff::SMALL;
use crate::stats::Counter;
use crate::table::{State, Table};
use core::sync::atomic::Ordering::*;

/// A release made by [`Engine::closing`]: it may take the table (so it
/// records the hook's frame) and make system calls (so it puts errno back),
/// where the common way of a close does neither.
#[inline(always)]
fn releasing<O: Os, R>(os: &O, f: impl FnOnce() -> R) -> R {
    os.framed(|| os.keeping_errno(f))
}

/// What [`Engine::closing`] did before a close-type call, for
/// [`Engine::closed`] to finish, or to undo if the call failed.
#[derive(Clone, Copy, Debug)]
pub struct Closing {
    lo: i32,
    hi: i32,
    table: FdTable,
    /// One descriptor whose mapped bit was cleared.
    mapped: bool,
    /// Its place among the closes of those numbers (`close_seq.rs`).
    place: Place,
}

impl Closing {
    /// The descriptors closed, where they are the process's table's (what
    /// a trace records for a replay to close again).
    pub fn fds(&self) -> Option<(i32, i32)> {
        (self.lo >= 0 && self.table == FdTable::Own).then_some((self.lo, self.hi))
    }

    /// A close of `[lo, hi]` in `table`, nothing done yet.
    #[inline(always)]
    fn of(lo: i32, hi: i32, table: FdTable) -> Closing {
        Closing {
            lo,
            hi,
            table,
            mapped: false,
            place: Place::NONE,
        }
    }

    /// Nothing to finish (no descriptor, or an empty range).
    pub const NONE: Closing = Closing {
        lo: -1,
        hi: -1,
        table: FdTable::VforkChild,
        mapped: false,
        place: Place::NONE,
    };
}

impl Engine {
    /// Whether the records of `fd` say anything a close would change and a
    /// close that did not happen would need back: a mapping was made
    /// through it.
    #[inline]
    pub fn fd_has_records(&self, fd: i32) -> bool {
        self.mapped_fds.get(fd)
    }

    /// Whether a close of `fd` may take the lane ([`Engine::close_lane`]):
    /// its number has a place in line of its own. Told before the lane's
    /// frame, so that a close that cannot take it pays for none.
    #[inline(always)]
    pub fn close_lane_may_take(&self, fd: i32) -> bool {
        self.close_seq.has_own(fd)
    }

    /// The common close, told inline in the hook: of a number with its
    /// own place in line (`close_seq.rs`) and no records, by a thread the
    /// hook knows to be on the process's table (what [`Os::fd_table`]
    /// would answer [`FdTable::Own`], told by the platform more cheaply).
    /// Takes its place and answers it: the caller makes the real call,
    /// then [`Engine::closed_lane`]. None (nothing taken):
    /// [`Engine::closing`] does the whole.
    #[inline(always)]
    pub fn close_lane(&self, fd: i32) -> Option<Place> {
        if !self.close_seq.has_own(fd) {
            return None;
        }
        let place = self.place_in_line(fd);
        // Looked at once the place is taken (a Dekker pairing with the
        // mmap that sets the mapped bit, then asks whether a close began).
        // Records are the whole way's: this place is given back as that
        // of a close that changed nothing, which only keeps a mapping whose
        // look spans it from being recorded.
        if self.fd_has_records(fd) {
            self.closed_lane(fd, place);
            return None;
        }
        Some(place)
    }

    /// A close of the one number `fd` is about to reach the kernel: its
    /// place in line, and what `F_GETFL` said of the number is void.
    #[inline(always)]
    fn place_in_line(&self, fd: i32) -> Place {
        let place = self.close_seq.begin(fd, fd);
        self.read_only_fds.closing(fd, fd);
        place
    }

    /// The real close of the one number `fd`, at `place`, returned,
    /// whatever it answered: the place ends, and `F_GETFL` may be asked
    /// about the number again. After [`Engine::close_lane`] no other record
    /// of the number was changed. Said with one number, so that neither
    /// asks about a range.
    #[inline(always)]
    pub fn closed_lane(&self, fd: i32, place: Place) {
        self.read_only_fds.closed(fd, fd);
        self.close_seq.end(fd, fd, place);
    }

    /// The program is about to close every descriptor in `[lo, hi]`:
    /// releases what was mapped through them. Costs a bit test for a
    /// descriptor nothing was mapped through, an atomic add and a few
    /// plain stores (what `F_GETFL` said of it is void from now on, and a
    /// mmap through it racing with the close must not be recorded). A
    /// close of a descriptor something was mapped through waits a bounded
    /// while for a table another thread holds; where it stays busy, the
    /// closes are noted and its holder releases those descriptors'
    /// mappings (see `release_or_note`). The hook
    /// calls [`Engine::closed`] with the answer once the real call returns.
    /// errno is kept: only a release makes system calls, and it puts errno
    /// back ([`Os::keeping_errno`]).
    ///
    /// In a vfork child (another table, the parent's still there) nothing
    /// is done: none of its closes ends a description the records know
    /// of. In a thread with a table of its own, the mappings made through
    /// those numbers are released conservatively (its close may be the
    /// last one of the description, or not) and no record changes.
    #[inline(always)]
    pub fn closing<O: Os>(&self, os: &O, lo: i32, hi: i32) -> Closing {
        if lo != hi {
            return self.closing_range(os, lo, hi);
        }
        let fd = lo;
        if fd < 0 {
            return Closing::NONE;
        }
        let table = os.fd_table();
        let mut c = Closing::of(fd, fd, table);
        match table {
            FdTable::VforkChild => return c,
            FdTable::Unshared => {
                if self.mapped_fds.get(fd) && self.active() {
                    releasing(os, || self.release_or_note(os, fd, fd, |_, _| {}));
                }
                return c;
            }
            FdTable::Own => {}
        }
        c.place = self.place_in_line(fd);
        if self.mapped_fds.get(fd) {
            self.released_at_close(os, fd);
            c.mapped = true;
        }
        c
    }

    /// A close of a descriptor through which mappings were made: they are
    /// released (see [`Engine::release_at_close`]), and its bit cleared.
    #[cold]
    #[inline(never)]
    fn released_at_close<O: Os>(&self, os: &O, fd: i32) {
        if self.active() {
            releasing(os, || self.release_at_close(os, fd, fd));
        }
        self.mapped_fds.clear(fd);
    }

    /// [`Engine::closing`] of a range (`close_range`, `closefrom`).
    #[inline(never)]
    fn closing_range<O: Os>(&self, os: &O, lo: i32, hi: i32) -> Closing {
        if lo < 0 || hi < lo {
            return Closing::NONE;
        }
        let table = os.fd_table();
        let mut c = Closing::of(lo, hi, table);
        match table {
            FdTable::VforkChild => return c,
            FdTable::Unshared => {
                if self.mapped_fds.any(lo, hi) && self.active() {
                    releasing(os, || self.release_or_note(os, lo, hi, |_, _| {}));
                }
                return c;
            }
            FdTable::Own => {}
        }
        c.place = self.close_seq.begin(lo, hi);
        self.read_only_fds.closing(lo, hi);
        if self.mapped_fds.any(lo, hi) {
            if self.active() {
                releasing(os, || self.release_at_close(os, lo, hi));
            }
            self.mapped_fds.clear_range(lo, hi);
        }
        c
    }

    /// At a close of `[lo, hi]` through which mappings were made: they are
    /// released, queued ones unmapped and live ones forgotten (each holds
    /// the open file the close ends, and its munmap is that file's last
    /// close: it goes to the kernel). A close of one number marks it
    /// (`closes_first`) where it forgot a small mapping the number has a
    /// bit for, and clears the mark otherwise.
    #[inline(never)]
    fn release_at_close<O: Os>(&self, os: &O, lo: i32, hi: i32) {
        let marked = core::cell::Cell::new(false);
        let forgetting = |fd: i32, len: usize| {
            if len <= SMALL && (fd as usize) < FD_BITS {
                self.closes_first.set(fd);
                marked.set(true);
            }
        };
        let released = self.release_or_note(os, lo, hi, forgetting);
        if lo == hi && released && !marked.get() {
            self.closes_first.clear(lo);
        }
    }

    /// Releases the mappings made through `[lo, hi]` now (true), each
    /// live one forgotten told to `forgetting`, or notes them for the
    /// table's holder if it stays busy. The close returns to the program
    /// only after them, as the last close of their files would have: where
    /// another thread holds the table, it is waited for a bounded while
    /// (holders keep it for microseconds); a close noted instead would be
    /// acted on at that holder's release, after the program, told its
    /// file is closed, may have asked for the file's lock elsewhere. A
    /// signal handler nested in this thread's own hook, which holds the
    /// table, notes at once: the hook it interrupted acts on it before it
    /// returns.
    #[inline(never)]
    fn release_or_note<O: Os>(
        &self,
        os: &O,
        lo: i32,
        hi: i32,
        forgetting: impl Fn(i32, usize),
    ) -> bool {
        match self.lock(os).or_else(|| self.lock_patiently(os)) {
            Some(mut q) => {
                self.release_fds(os, &mut q.table, lo, hi, forgetting);
                self.publish_bounds(&q.table);
                true
            }
            None => {
                self.count(Counter::PassContention);
                let mut fd = lo;
                while let Some(f) = self.mapped_fds.first(fd, hi) {
                    self.closed_busy.set(f);
                    fd = f + 1;
                }
                if hi as usize >= FD_BITS {
                    self.closed_busy.set(FD_BITS as i32);
                }
                self.closes_pending.store(true, Release);
                self.fell_behind(os);
                false
            }
        }
    }

    /// The real call announced by [`Engine::closing`] returned; `ok`
    /// unless it failed without closing anything (`dup2` from a bad
    /// descriptor, bad flags): then the descriptor keeps its bit (mappings
    /// made through it), and the live mappings the close forgot stay
    /// forgotten. Either way the numbers may name new descriptions now,
    /// about which `F_GETFL` may be asked again.
    #[inline(always)]
    pub fn closed(&self, c: Closing, ok: bool) {
        if c.table != FdTable::Own {
            return;
        }
        if c.lo == c.hi {
            self.closed_lane(c.lo, c.place);
        } else {
            self.closed_range(c);
        }
        if !ok {
            self.closed_nothing(c);
        }
    }

    #[inline(never)]
    fn closed_range(&self, c: Closing) {
        self.read_only_fds.closed(c.lo, c.hi);
        self.close_seq.end(c.lo, c.hi, c.place);
    }

    #[cold]
    #[inline(never)]
    fn closed_nothing(&self, c: Closing) {
        if c.mapped {
            // Its live mappings the close forgot stay forgotten (their
            // munmaps go to the kernel, a reuse lost): one of them may have
            // been made through an open file the number no longer names.
            self.mapped_fds.set(c.lo);
        }
    }

    /// Applies the closes that found the table busy (see
    /// [`Engine::closing`]); by the table's holder.
    pub(super) fn apply_closes<O: Os>(&self, os: &O, t: &mut Table) {
        if !self.closes_pending.load(Relaxed) || !self.closes_pending.swap(false, Acquire) {
            return;
        }
        let mut fd = 0;
        while let Some(f) = self.closed_busy.first(fd, i32::MAX) {
            self.closed_busy.clear(f);
            self.release_fds(os, t, f, f, |_, _| {});
            fd = f + 1;
        }
        if self.closed_busy.get(FD_BITS as i32) {
            self.release_fds(os, t, FD_BITS as i32, i32::MAX, |_, _| {});
        }
    }

    /// Queued entries mapped through a descriptor in `[lo, hi]` are
    /// unmapped, and live ones forgotten, each told to `forgetting(fd,
    /// len)` (one being unmapped by a flush keeps its slot, without the
    /// descriptor).
    fn release_fds<O: Os>(
        &self,
        os: &O,
        t: &mut Table,
        lo: i32,
        hi: i32,
        forgetting: impl Fn(i32, usize),
    ) {
        let mut pos = 0;
        while let Some((at, e)) = t.next_with_fd(pos, lo, hi) {
            pos = at;
            match e.state {
                State::Queued => self.unmap_queued(os, t, e, Counter::ReleasedAtClose),
                State::Live => {
                    forgetting(e.fd, e.len);
                    t.remove(e.slot);
                    self.count(Counter::Forgotten);
                }
                _ => {
                    t.orphan(e.slot);
                    pos = at + 1;
                }
            }
        }
    }

    /// The program is about to unlink or rename over the file `(dev, ino)`:
    /// its queued mappings are unmapped (they would keep a deleted file's
    /// space) and live ones forgotten (their munmap then goes to the
    /// kernel). Costs nothing while nothing is tracked.
    pub fn unlinking<O: Os>(&self, os: &O, dev: u64, ino: u64) {
        if !self.active() || self.untracked(0, usize::MAX) {
            return;
        }
        match self.lock(os) {
            Some(mut q) => {
                self.release_file(os, &mut q.table, dev, ino);
                self.publish_bounds(&q.table);
            }
            None => self.name_lost_while_busy(os, dev, ino),
        }
    }

    /// Whether anything is tracked: a caller can skip asking which file a
    /// path names.
    pub fn tracks_any(&self) -> bool {
        self.active() && !self.untracked(0, usize::MAX)
    }

    /// The program is about to unmount a file system: every queued mapping
    /// is unmapped, so that none keeps it busy. Unmounts are rare, and one
    /// that found a queued mapping still there would fail (EBUSY) where it
    /// succeeds without munmapq: a busy table is waited for a bounded
    /// while, as before a fork. Only where it stays busy (a signal handler
    /// that interrupted this thread's own hook) is the unmount recorded
    /// for the next holder.
    pub fn unmounting<O: Os>(&self, os: &O) {
        if !self.tracks_any() {
            return;
        }
        match self.lock(os).or_else(|| self.lock_patiently(os)) {
            Some(mut q) => self.release_for_unmount(os, &mut q),
            None => self.unmount_while_busy(os),
        }
    }
}
