//! A fake address space for replaying a trace through the real engine.
//!
//! A fresh mapping goes where the traced program got it (the kernel said the
//! range was free), unless a window this replay still holds is there (the
//! replayed policy kept what the traced run had unmapped); then it goes
//! top-down into the highest gap below, as Linux's allocator does.
//! Program addresses in later records are translated to where the replay
//! put the mapping.

use crate::trace::{self, Rec};
use munmapq_core::engine::{Effect, Engine};
use munmapq_core::os::{Errno, Os, PerThread, SignalStack};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

/// A mapping the fake kernel holds: its end, and whether it is a file
/// window (one the engine may hold on to).
type Space = BTreeMap<usize, (usize, bool)>;

#[derive(Default)]
pub struct FakeOs {
    space: RefCell<Space>,
    current: Cell<Option<Rec>>,
    peak_rss: Cell<u64>,
    /// Traced start -> (length, replayed start).
    xlate: RefCell<BTreeMap<usize, (usize, usize)>>,
}

fn remove_range(space: &mut Space, start: usize, end: usize) {
    let hits: Vec<(usize, (usize, bool))> = space
        .range(..end)
        .rev()
        .take_while(|(_, (e, _))| *e > start)
        .map(|(s, v)| (*s, *v))
        .collect();
    for (s, (e, file)) in hits {
        space.remove(&s);
        if s < start {
            space.insert(s, (start, file));
        }
        if e > end {
            space.insert(end, (e, file));
        }
    }
}

fn overlaps(space: &Space, start: usize, end: usize, files_only: bool) -> bool {
    space
        .range(..end)
        .rev()
        .take_while(|(_, (e, _))| *e > start)
        .any(|(_, (_, file))| *file || !files_only)
}

/// The highest gap below the existing mappings that holds `len`.
fn top_down(space: &Space, len: usize) -> usize {
    let mut above: Option<usize> = None;
    for (&s, &(e, _)) in space.iter().rev() {
        if let Some(a) = above {
            if a >= e + len {
                return a - len;
            }
        }
        above = Some(above.map_or(s, |a| a.min(s)));
    }
    above.unwrap_or(0x7f00_0000_0000) - len
}

impl Os for FakeOs {
    fn mmap(
        &self,
        addr: usize,
        len: usize,
        _prot: i32,
        flags: i32,
        _fd: i32,
        _off: i64,
    ) -> Result<usize, Errno> {
        let r = self.current.get().expect("mmap outside a record");
        if r.result < 0 {
            return Err(-r.result as Errno);
        }
        let len = len.div_ceil(4096) * 4096;
        let file = r.ino != 0;
        let mut space = self.space.borrow_mut();
        let start = if flags & libc::MAP_FIXED != 0 {
            addr
        } else {
            let hint = r.result as usize;
            if overlaps(&space, hint, hint + len, true) {
                top_down(&space, len)
            } else {
                hint
            }
        };
        remove_range(&mut space, start, start + len);
        space.insert(start, (start + len, file));
        Ok(start)
    }

    fn munmap(&self, addr: usize, len: usize) -> Result<(), Errno> {
        if !addr.is_multiple_of(4096) || len == 0 {
            return Err(libc::EINVAL);
        }
        remove_range(
            &mut self.space.borrow_mut(),
            addr,
            addr + len.div_ceil(4096) * 4096,
        );
        Ok(())
    }

    fn readable_file(&self, _fd: i32) -> Option<munmapq_core::file::FileFacts> {
        let r = self.current.get()?;
        // A trace records which file, not its stamp: files are taken as
        // unchanged during the traced run.
        (r.ino != 0).then_some(munmapq_core::file::FileFacts {
            dev: r.dev,
            ino: r.ino,
            stamp: Default::default(),
        })
    }

    /// The resident set the traced run had at that call (its munmap
    /// records carry it); the address space as unlimited.
    fn usage(&self) -> Option<munmapq_core::sizing::Usage> {
        Some(munmapq_core::sizing::Usage {
            size: 0,
            resident: self.peak_rss.get() as usize,
        })
    }

    /// The trace does not record the process's mapping count: no
    /// `vm.max_map_count` room is replayed (the count cap is).
    fn map_count(&self) -> Option<usize> {
        None
    }

    fn address_space_limit(&self) -> Option<usize> {
        None
    }

    /// Dropping pages changes no counter a replay compares.
    fn drop_pages(&self, _addr: usize, _len: usize) -> bool {
        true
    }

    /// A replay runs on one thread and never longjmps out of a hook.
    fn thread_cells(&self) -> Option<&'static PerThread> {
        None
    }

    fn this_thread(&self) -> usize {
        1
    }

    fn signal_stack(&self) -> SignalStack {
        SignalStack::Elsewhere
    }
}

impl FakeOs {
    /// Where the replay has what the traced program had at `addr`.
    fn translate(&self, addr: usize) -> usize {
        let x = self.xlate.borrow();
        match x.range(..=addr).next_back() {
            Some((&s, &(len, to))) if addr < s + len => to + (addr - s),
            _ => addr,
        }
    }
}

/// Replays one record on `engine`.
pub fn apply(engine: &Engine, os: &FakeOs, r: &Rec) {
    os.current.set(Some(*r));
    if r.peak_rss != 0 {
        os.peak_rss.set(r.peak_rss);
    }
    match r.kind {
        trace::KIND_MMAP => {
            let addr = if r.addr == 0 { 0 } else { os.translate(r.addr) };
            let got = engine.mmap(os, addr, r.len, r.prot, r.flags, r.fd, r.off);
            if let (Ok(to), true) = (got, r.result >= 0) {
                let from = r.result as usize;
                let len = r.len.div_ceil(4096) * 4096;
                let mut x = os.xlate.borrow_mut();
                let stale: Vec<usize> = x
                    .range(..from + len)
                    .rev()
                    .take_while(|(s, (l, _))| *s + *l > from)
                    .map(|(s, _)| *s)
                    .collect();
                for s in stale {
                    x.remove(&s);
                }
                x.insert(from, (len, to));
            }
        }
        trace::KIND_MUNMAP => {
            let _ = engine.munmap(os, os.translate(r.addr), r.len);
            if r.result == 0 {
                os.xlate.borrow_mut().remove(&r.addr);
            }
        }
        trace::KIND_MODIFY | trace::KIND_INSPECT => {
            let effect = if r.kind == trace::KIND_MODIFY {
                Effect::Modify
            } else {
                Effect::Inspect
            };
            let span = engine.span(os.translate(r.addr), r.len, effect);
            let _ = engine.range_call(os, &[span], || Ok::<_, Errno>(0));
        }
        trace::KIND_LOCK_ALL => {
            let _ = engine.lock_all(os, r.flags & libc::MCL_FUTURE != 0, || Ok::<_, Errno>(0));
        }
        _ => {}
    }
    os.current.set(None);
}
