//! What the table's holder does when records of calls made while the table
//! was busy were lost ([`crate::dirty`]'s ring ran full: a holder was
//! preempted while other threads kept calling, or a signal handler inside
//! a hook made more calls than the ring holds). Which ranges those calls
//! acted on is not known, only that every entry inserted up to the
//! epoch of the last lost record may be wrong.
//!
//! - A live entry is dropped: the program's next munmap of it goes to the
//!   kernel. The common busy call is a munmap of the caller's own mapping.
//! - A queued entry is munmapq's own mapping unless a lost call replaced
//!   it (`MAP_FIXED` or `mremap` over a range the program had unmapped), and
//!   a replacement is the program's, which must neither be handed out as
//!   the file's window nor unmapped. The kernel tells which: where a
//!   private mapping of the same file (device and inode) at the window's
//!   offset covers it, it is munmapq's, and is unmapped (a lost call may
//!   have changed it in ways the kernel's list does not show: `mlock`,
//!   `madvise`, a write after `mprotect`, so it is not handed out again);
//!   anything else there is someone else's, or nothing, and is left alone.
//!
//! Where the kernel cannot be asked, or names a file by another device
//! than `stat` does (the same inode and offset on another device: btrfs
//! subvolumes, overlayfs before Linux 6.8, or another file system's file
//! with the same inode number), no queued entry can be told from a
//! replacement: they are left mapped, and the engine stops queueing for
//! good, so that what a loss leaves mapped is one queue at most.

use super::{Engine, OFF};
use crate::os::{Os, Region};
use crate::stats::Counter;
use crate::table::{Entry, State, Table};
use core::sync::atomic::Ordering::Release;

/// How many reads of the mappings for one answer to lost records may be
/// cut short (by a call lost during the read) before it judged a queued
/// entry more.
const FRUITLESS_READS: usize = 4;
/// How many reads one answer makes at most: threads that keep calling
/// while a preempted holder reads may cut each read short after it judged
/// a few entries, and the holding must end.
const MOST_READS: usize = 32;

/// The entry being judged against the kernel's mappings.
struct Judging {
    entry: Entry,
    /// `[entry.start, to)` is judged.
    to: usize,
    /// All of what is judged was munmapq's (and is unmapped).
    whole: bool,
}

/// What the kernel has at a queued window's address.
#[derive(PartialEq)]
enum Found {
    /// Its file at its offset.
    Window,
    /// Its inode at its offset, on another device.
    Unsure,
    Other,
}

impl Engine {
    /// The drain's answer to a lost record of epoch `epoch`. A call lost
    /// while the mappings are read may change what the read found: the
    /// answer stops there and is made again, for both losses, before
    /// anything else is done with the table (an entry it has unmapped some
    /// of stays, for the next read to judge the rest). Where losses keep
    /// cutting the reads short before they judge anything more, no entry is
    /// trusted, as where the mappings cannot be read.
    #[cold]
    #[inline(never)]
    pub(super) fn records_lost<O: Os>(&self, os: &O, t: &mut Table, mut epoch: u64) {
        self.count(Counter::LostRecords);
        let mut fruitless = 0;
        for _ in 0..MOST_READS {
            let queued = t.queued();
            if self.judge_queued(os, t, epoch).is_some() {
                return;
            }
            epoch = self.dirty.take_loss().unwrap_or(epoch).max(epoch);
            // The records made during the read (the ring ran full again)
            // are applied and freed, so that the next read has room for
            // those made during it.
            self.apply_records(os, t, Some(epoch));
            fruitless += (t.queued() == queued) as usize;
            if fruitless == FRUITLESS_READS {
                break;
            }
        }
        self.forget(t, 0, usize::MAX, epoch, false);
        self.stop_queueing(os, t);
    }

    /// One read of the mappings for [`Engine::records_lost`]: None where a
    /// call lost meanwhile cut it short.
    fn judge_queued<O: Os>(&self, os: &O, t: &mut Table, epoch: u64) -> Option<()> {
        self.forget(t, 0, usize::MAX, epoch, true);
        let mut judging = next_to_judge(t, 0, epoch);
        let (mut unsure, mut lost_again) = (false, false);
        // Calls from here on may change what the read finds.
        let since = self.dirty.epoch();
        let told = os.each_region(|r| {
            while let Some(j) = judging.as_mut() {
                if r.end <= j.to || lost_again {
                    return;
                }
                let e = j.entry;
                if r.start < e.end() {
                    let (from, to) = (r.start.max(j.to), r.end.min(e.end()));
                    let found = found(t, e, from, &r);
                    j.whole &= r.start <= j.to && found == Found::Window;
                    unsure |= found == Found::Unsure;
                    if found == Found::Window {
                        // A call lost since this read began may have
                        // replaced what the read found (and calls the
                        // record holds are looked at by the unmap).
                        lost_again = self.dirty.lost_since(since);
                        if lost_again {
                            return;
                        }
                        let left = self.unmap_piece(os, t, from, to, since);
                        lost_again = self.dirty.lost_since(since);
                        if left && lost_again {
                            // What the loss left mapped is judged again.
                            return;
                        }
                        // A piece unmapped is judged even where a loss
                        // follows, so that a read cut short still moves on.
                        j.whole &= !left;
                    }
                    j.to = to;
                    if to < e.end() {
                        return;
                    }
                }
                self.judged(t, e, j.whole && j.to == e.end());
                judging = next_to_judge(t, e.end(), epoch);
            }
        });
        if lost_again {
            return None;
        }
        // The rest have no mapping left at their end: lost munmaps took it.
        while let Some(j) = judging {
            self.judged(t, j.entry, false);
            judging = next_to_judge(t, j.entry.end(), epoch);
        }
        if told.is_none() || unsure {
            self.forget(t, 0, usize::MAX, epoch, false);
            self.stop_queueing(os, t);
        }
        Some(())
    }

    /// Unmaps `[from, to)`, but for what a call that began at `since` or
    /// later, whose record was lost, may have made someone else's (or a
    /// recorded replacement made the program's): whether some was left.
    fn unmap_piece<O: Os>(
        &self,
        os: &O,
        t: &mut Table,
        from: usize,
        to: usize,
        since: u64,
    ) -> bool {
        let mut left = false;
        t.unmap_in_flight(from, to - from, || {
            left = self.books().unmap_since(os, from, to - from, since);
        });
        t.finish_unmap();
        left
    }

    /// `e` is judged: unmapped whole, or in the pieces that were its own.
    fn judged(&self, t: &mut Table, e: Entry, whole: bool) {
        t.remove(e.slot);
        self.count(if whole {
            Counter::Released
        } else {
            Counter::ForgottenQueued
        });
    }

    /// No queued entry can be trusted: the newer ones (which no lost call
    /// preceded) are unmapped, the table emptied, and every later call
    /// passes through, as [`Engine::stop_for_good`] does (which waits for
    /// the table this holder has).
    fn stop_queueing<O: Os>(&self, os: &O, t: &mut Table) {
        self.state.store(OFF, Release);
        while let Some(e) = t.first_from(0) {
            if e.state == State::Queued {
                self.unmap_queued(os, t, e, Counter::Released);
            } else {
                t.remove(e.slot);
            }
        }
        self.publish_bounds(t);
    }
}

/// The first queued entry at or after `from` that the lost records may
/// have acted on.
fn next_to_judge(t: &Table, mut from: usize, epoch: u64) -> Option<Judging> {
    while let Some(entry) = t.first_from(from) {
        if entry.state == State::Queued && entry.epoch <= epoch {
            return Some(Judging {
                entry,
                to: entry.start,
                whole: true,
            });
        }
        from = entry.end();
    }
    None
}

/// What the mapping `r`, which covers `at`, is of the queued entry `e`:
/// a private read-only mapping of its file at the offset `e`'s window has
/// at `at`? (A lost `mprotect` that made the window writable makes it
/// another's here: left mapped, where a program's own writable mapping of
/// the file would be unmapped under it.)
fn found(t: &Table, e: Entry, at: usize, r: &Region) -> Found {
    let key = t.key(e.slot);
    let want = key.off.wrapping_add((at - e.start) as u64);
    let here = r.off.wrapping_add((at - r.start) as u64);
    let read_only = r.prot & libc::PROT_WRITE == 0;
    match r.private && read_only && r.ino != 0 && r.ino == key.ino && here == want {
        false => Found::Other,
        true if r.dev == key.dev => Found::Window,
        true => Found::Unsure,
    }
}
