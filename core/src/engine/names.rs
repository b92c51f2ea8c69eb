//! Unlinks, renames and unmounts (announced by `Engine::unlinking` and
//! `Engine::unmounting`) that found the table busy: recorded in
//! [`crate::names`] and applied by the table's next holder, as closes are.

use super::Engine;
use crate::names::Lost;
use crate::os::Os;
use crate::queue::Queue;
use crate::stats::Counter;
use crate::table::{State, Table};

impl Engine {
    /// The file `(dev, ino)` lost a name: its queued mappings are unmapped
    /// (they would keep a deleted file's space) and its live ones
    /// forgotten (their munmap then goes to the kernel).
    pub(super) fn release_file<O: Os>(&self, os: &O, t: &mut Table, dev: u64, ino: u64) {
        while let Some(e) = t.entry_of_file(dev, ino) {
            if e.state == State::Queued {
                self.unmap_queued(os, t, e, Counter::ReleasedAtClose);
            } else {
                t.remove(e.slot);
                self.count(Counter::Forgotten);
            }
        }
    }

    /// A file system is unmounted: no queued mapping may keep it busy.
    pub(super) fn release_for_unmount<O: Os>(&self, os: &O, q: &mut Queue) {
        let n = q.table.queued() as u64;
        q.flush_all(os, self.books());
        self.count_n(Counter::ReleasedAtClose, n);
        self.publish_bounds(&q.table);
    }

    pub(super) fn name_lost_while_busy<O: Os>(&self, os: &O, dev: u64, ino: u64) {
        self.count(Counter::PassContention);
        self.lost_names.file(dev, ino);
        self.fell_behind(os);
    }

    pub(super) fn unmount_while_busy<O: Os>(&self, os: &O) {
        self.count(Counter::PassContention);
        self.lost_names.unmount();
        self.fell_behind(os);
    }

    /// Applies what [`crate::names`] recorded; by the table's holder.
    pub(super) fn apply_names<O: Os>(&self, os: &O, q: &mut Queue) {
        self.lost_names.drain(|lost| match lost {
            Lost::File(dev, ino) => self.release_file(os, &mut q.table, dev, ino),
            Lost::Unmount => self.release_for_unmount(os, q),
            Lost::Any => {
                // Which file is not known: every file.
                self.release_for_unmount(os, q);
                self.count_n(Counter::Forgotten, q.table.len() as u64);
                q.table.clear();
            }
        });
        self.publish_bounds(&q.table);
    }

    /// After the real unlink, rename or unmount: if it had to record
    /// itself (the table was busy), one more try at the table, which
    /// applies the record now if its holder is done (else the next holder
    /// does). Never waits.
    pub fn name_call_done<O: Os>(&self, os: &O) {
        if self.active() && self.lost_names.pending() {
            let _ = self.lock(os);
        }
    }
}
