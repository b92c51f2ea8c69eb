//! Counting the files whose last mapping a real munmap removes: on macOS
//! that is the costly unmap (the mapping's private copy object is
//! terminated and the file's `ubc_unmap` runs; the next mmap of the file
//! builds a copy object again, `vm_object_copy_delayed`), where unmapping
//! one window of a file that stays mapped elsewhere is not. The cost is per
//! file: one munmap over the queued windows of ten files tears ten down.
//!
//! [`Watched`] is the fake kernel seen through a record of which file each
//! replayed mapping (live or queued) shows: every munmap the engine makes,
//! the program's passed through and the queue's evictions and flushes
//! alike, reaches the kernel through it.

use munmapq_core::fake::FakeOs;
use munmapq_core::file::FileFacts;
use munmapq_core::os::{Errno, Mmap, Os, PerThread, SignalStack, Usage};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

/// A file: device and inode.
type File = (u64, u64);

/// Which file each mapped range shows, and how many ranges each file has.
#[derive(Default)]
pub struct FileMaps {
    /// Start -> (end, file).
    ranges: BTreeMap<usize, (usize, File)>,
    count: HashMap<File, usize>,
    /// Files whose last mapping a real munmap removed (each time it did).
    pub last_unmaps: u64,
}

impl FileMaps {
    fn insert(&mut self, start: usize, end: usize, file: File) {
        self.ranges.insert(start, (end, file));
        *self.count.entry(file).or_default() += 1;
    }

    /// Files that still have a mapping.
    pub fn files_mapped(&self) -> u64 {
        self.count.len() as u64
    }

    /// Forgets `[start, end)`; answers how many files it covered that
    /// it left without any mapping.
    fn remove(&mut self, start: usize, end: usize) -> u64 {
        let hit: Vec<(usize, (usize, File))> = self
            .ranges
            .range(..end)
            .rev()
            .take_while(|(_, (e, _))| *e > start)
            .map(|(s, v)| (*s, *v))
            .collect();
        let mut touched = Vec::new();
        for (s, (e, file)) in hit {
            self.ranges.remove(&s);
            *self.count.get_mut(&file).expect("counted") -= 1;
            if s < start {
                self.insert(s, start, file);
            }
            if e > end {
                self.insert(end, e, file);
            }
            touched.push(file);
        }
        let mut last = 0;
        for file in touched {
            if self.count.get(&file) == Some(&0) {
                self.count.remove(&file);
                last += 1;
            }
        }
        last
    }
}

/// The fake kernel, with each mapping's file recorded and each munmap
/// that leaves a file unmapped counted.
pub struct Watched<'a, const N: usize> {
    pub os: &'a FakeOs<N>,
    pub maps: &'a RefCell<FileMaps>,
    /// What [`Os::drops_free_memory`] answers under the replayed rules.
    pub drops_free_memory: bool,
}

impl<const N: usize> Watched<'_, N> {
    fn end(&self, addr: usize, len: usize) -> usize {
        addr + len.div_ceil(self.os.page) * self.os.page
    }
}

impl<const N: usize> Os for Watched<'_, N> {
    fn mmap(&self, call: Mmap) -> Result<usize, Errno> {
        let at = self.os.mmap(call)?;
        let end = self.end(at, call.len);
        let mut maps = self.maps.borrow_mut();
        // What a MAP_FIXED mapping replaced is gone without a munmap.
        maps.remove(at, end);
        if let Some(f) = (call.fd >= 0).then(|| self.file_facts(call.fd)).flatten() {
            maps.insert(at, end, (f.dev, f.ino));
        }
        Ok(at)
    }

    fn munmap(&self, addr: usize, len: usize) -> Result<(), Errno> {
        self.os.munmap(addr, len)?;
        let end = self.end(addr, len);
        let mut maps = self.maps.borrow_mut();
        maps.last_unmaps += maps.remove(addr, end);
        Ok(())
    }

    fn file_facts(&self, fd: i32) -> Option<FileFacts> {
        self.os.file_facts(fd)
    }

    fn open_flags(&self, fd: i32) -> i32 {
        self.os.open_flags(fd)
    }

    fn tracks_closes(&self) -> bool {
        self.os.tracks_closes()
    }

    fn max_map_count(&self) -> Option<usize> {
        self.os.max_map_count()
    }

    fn usage(&self) -> Option<Usage> {
        self.os.usage()
    }

    fn peak_resident(&self) -> Option<usize> {
        self.os.peak_resident()
    }

    fn map_count(&self) -> Option<usize> {
        self.os.map_count()
    }

    fn address_space_limit(&self) -> Option<usize> {
        self.os.address_space_limit()
    }

    fn drop_pages(&self, addr: usize, len: usize) -> bool {
        self.os.drop_pages(addr, len)
    }

    fn drops_free_memory(&self) -> bool {
        self.drops_free_memory
    }

    fn thread_cells(&self) -> Option<&'static PerThread> {
        self.os.thread_cells()
    }

    fn this_thread(&self) -> usize {
        self.os.this_thread()
    }

    fn signal_stack(&self) -> SignalStack {
        self.os.signal_stack()
    }
}

#[cfg(test)]
mod tests {
    use super::FileMaps;

    #[test]
    fn the_last_range_of_a_file_is_told() {
        let mut m = FileMaps::default();
        m.insert(0, 10, (1, 1));
        m.insert(20, 30, (1, 1));
        m.insert(30, 40, (1, 2));
        assert_eq!(m.remove(0, 10), 0, "file 1 is still mapped at 20");
        assert_eq!(m.remove(22, 24), 0, "a hole in the middle keeps both ends");
        assert_eq!(m.remove(20, 22), 0);
        assert_eq!(m.remove(24, 35), 1, "file 1's last range");
        assert_eq!(m.files_mapped(), 1);
        assert_eq!(m.remove(35, 40), 1, "file 2's last range");
        assert_eq!(m.files_mapped(), 0);
    }

    #[test]
    fn one_munmap_over_several_files_tears_each_down() {
        let mut m = FileMaps::default();
        m.insert(0, 10, (1, 1));
        m.insert(10, 20, (1, 2));
        m.insert(20, 30, (1, 3));
        m.insert(40, 50, (1, 3));
        assert_eq!(m.remove(0, 30), 2, "files 1 and 2; file 3 stays at 40");
        assert_eq!(m.files_mapped(), 1);
    }
}
