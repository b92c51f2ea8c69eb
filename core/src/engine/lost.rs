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
//!   the file's window nor unmapped. The kernel tells which: a range still
//!   covered, page for page, by a private mapping of the same file
//!   (inode) and offset is munmapq's, and is unmapped (a lost call may have
//!   changed it in ways its line does not show: `mlock`, `madvise`, a
//!   write after `mprotect`, so it is not handed out again); anything
//!   else there is someone else's, or nothing, and the entry is forgotten.
//!
//! Where the kernel cannot be asked, no queued entry can be told from a
//! replacement: they are all forgotten, left mapped, and the engine stops
//! queueing for good, so that what a loss leaves mapped is one queue at
//! most.

use super::{Engine, OFF};
use crate::os::{Os, Region};
use crate::stats::Counter;
use crate::table::{Entry, State, Table};
use core::sync::atomic::Ordering::Release;

/// How far the kernel's mappings have confirmed the entry being judged.
struct Judging {
    entry: Entry,
    /// `[entry.start, to)` is covered by mappings that match it.
    to: usize,
}

impl Engine {
    /// The drain's answer to a lost record of epoch `epoch`.
    #[cold]
    #[inline(never)]
    pub(super) fn records_lost<O: Os>(&self, os: &O, t: &mut Table, epoch: u64) {
        self.count(Counter::LostRecords);
        self.forget(t, 0, usize::MAX, epoch, true);
        let mut judging = self.next_to_judge(t, 0, epoch);
        let told = os.each_region(|r| {
            while let Some(j) = judging.as_mut() {
                if r.end <= j.to {
                    return;
                }
                let e = j.entry;
                let ours = r.start <= j.to && same_window(t, e, j.to, &r);
                if ours && r.end < e.end() {
                    j.to = r.end;
                    return;
                }
                self.judged(os, t, e, ours);
                judging = self.next_to_judge(t, e.end(), epoch);
            }
        });
        if told.is_none() {
            self.forget(t, 0, usize::MAX, epoch, false);
            self.stop_queueing(os, t);
            return;
        }
        // The rest have no mapping left: lost munmaps took them.
        while let Some(j) = judging {
            self.judged(os, t, j.entry, false);
            judging = self.next_to_judge(t, j.entry.end(), epoch);
        }
    }

    /// The first queued entry at or after `from` that the lost records may
    /// have acted on.
    fn next_to_judge(&self, t: &Table, mut from: usize, epoch: u64) -> Option<Judging> {
        while let Some(entry) = t.first_from(from) {
            if entry.state == State::Queued && entry.epoch <= epoch {
                return Some(Judging {
                    entry,
                    to: entry.start,
                });
            }
            from = entry.end();
        }
        None
    }

    fn judged<O: Os>(&self, os: &O, t: &mut Table, e: Entry, ours: bool) {
        if ours {
            self.unmap_queued(os, t, e, Counter::Released);
        } else {
            t.remove(e.slot);
            self.count(Counter::ForgottenQueued);
        }
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

/// Does the mapping `r`, which covers `at`, continue the queued entry `e`
/// there: a private mapping of the same file, at the offset `e`'s window
/// has at `at`?
fn same_window(t: &Table, e: Entry, at: usize, r: &Region) -> bool {
    let key = t.key(e.slot);
    let want = key.off.wrapping_add((at - e.start) as u64);
    r.private && r.ino != 0 && r.ino == key.ino && r.off.wrapping_add((at - r.start) as u64) == want
}
