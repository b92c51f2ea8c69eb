//! The calls after which the kernel does what it does at a file's last
//! close (close, dup2 onto an open descriptor, unlink, unmount), and the
//! locks that make a descriptor's close matter.
//!
//! A queued mapping holds the open file it was made through: were it left
//! queued, the program's close would no longer be the last one, and locks,
//! leases, a deleted file's space, inotify's close events and unmounts
//! would wait for the queue. So before the real close, the queued mappings
//! made through that descriptor are really unmapped. Live ones stay
//! tracked as orphans (the program often closes a descriptor before it
//! unmaps what it mapped, then maps the file again: that reuse is kept),
//! unless the descriptor carried a lock, a lease or an OFD lock, which
//! their mapping would keep past the close: those are forgotten, so their
//! munmap goes to the kernel.

use super::Engine;
use crate::fds::FD_BITS;
use crate::os::Os;
use crate::stats::Counter;
use crate::table::{State, Table};
use core::sync::atomic::Ordering::*;

impl Engine {
    /// A lock (`flock`, an OFD lock) or lease was taken through `fd`.
    /// POSIX record locks need nothing: the kernel drops them at any close
    /// of the file by the process, whatever still maps it.
    pub fn fd_locked(&self, fd: i32) {
        self.carrying_fds.set(fd);
    }

    /// `new` is now a duplicate of `old` (dup, dup2, dup3, F_DUPFD): it
    /// carries what `old` carries.
    pub fn fd_duplicated(&self, old: i32, new: i32) {
        if new >= 0 && self.carrying_fds.get(old) {
            self.carrying_fds.set(new);
        }
    }

    /// The program is about to close every descriptor in `[lo, hi]`:
    /// releases what was mapped through them. Costs a bit test for a
    /// descriptor nothing was mapped through, and a store (what `F_GETFL`
    /// said of it is void from now on). Never waits: if the table is
    /// busy, the closes are noted and the next holder of the table releases
    /// those descriptors' mappings, conservatively (as if each carried a
    /// lock). The hook calls [`Engine::closed`] once the real call returns.
    pub fn closing<O: Os>(&self, os: &O, lo: i32, hi: i32) {
        if lo < 0 || hi < lo {
            return;
        }
        self.read_only_fds.closing(lo, hi);
        let mapped = self.mapped_fds.any(lo, hi);
        if mapped && self.active() {
            match self.lock(os) {
                Some(mut q) => {
                    let carrying = |fd: i32| fd as usize >= FD_BITS || self.carrying_fds.get(fd);
                    self.release_fds(os, &mut q.table, lo, hi, carrying);
                    self.publish_bounds(&q.table);
                }
                None => {
                    self.stats.bump(Counter::PassContention);
                    let mut fd = lo;
                    while let Some(f) = self.mapped_fds.first(fd, hi) {
                        self.closed_busy.set(f);
                        fd = f + 1;
                    }
                    if hi as usize >= FD_BITS {
                        self.closed_busy.set(FD_BITS as i32);
                    }
                    self.closes_pending.store(true, Release);
                }
            }
        }
        if mapped {
            self.mapped_fds.clear_range(lo, hi);
        }
        if self.carrying_fds.any(lo, hi) {
            self.carrying_fds.clear_range(lo, hi);
        }
    }

    /// The real close of `[lo, hi]` (announced by [`Engine::closing`])
    /// returned, whether it succeeded or not: the numbers may name new
    /// descriptions, about which `F_GETFL` may be asked again.
    #[inline]
    pub fn closed(&self, lo: i32, hi: i32) {
        if lo < 0 || hi < lo {
            return;
        }
        self.read_only_fds.closed(lo, hi);
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
            self.release_fds(os, t, f, f, |_| true);
            fd = f + 1;
        }
        if self.closed_busy.get(FD_BITS as i32) {
            self.release_fds(os, t, FD_BITS as i32, i32::MAX, |_| true);
        }
    }

    /// Queued entries mapped through a descriptor in `[lo, hi]` are
    /// unmapped; live ones become orphans, or are forgotten where
    /// `carrying(fd)`.
    fn release_fds<O: Os>(
        &self,
        os: &O,
        t: &mut Table,
        lo: i32,
        hi: i32,
        carrying: impl Fn(i32) -> bool,
    ) {
        let mut pos = 0;
        while let Some((at, e)) = t.next_with_fd(pos, lo, hi) {
            pos = at;
            match e.state {
                State::Queued => self.unmap_queued(os, t, e, Counter::ReleasedAtClose),
                State::Live if carrying(e.fd) => {
                    t.remove(e.slot);
                    self.stats.bump(Counter::Forgotten);
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
            None => self.name_lost_while_busy(dev, ino),
        }
    }

    /// Whether anything is tracked: a caller can skip asking which file a
    /// path names.
    pub fn tracks_any(&self) -> bool {
        self.active() && !self.untracked(0, usize::MAX)
    }

    /// The program is about to unmount a file system: every queued mapping
    /// is unmapped, so that none keeps it busy.
    pub fn unmounting<O: Os>(&self, os: &O) {
        if !self.tracks_any() {
            return;
        }
        match self.lock(os) {
            Some(mut q) => self.release_for_unmount(os, &mut q),
            None => self.unmount_while_busy(),
        }
    }
}
