//! The real core engine on one process's records, on the core's fake
//! kernel told what the traced kernel answered (`munmapq_core::fake`).
//!
//! A fresh mapping goes where the traced program got it, unless a window
//! the replayed policy still holds is there (it kept what the traced run
//! had unmapped); then where Linux's allocator would put it. Program
//! addresses in later records are translated to where the replay put the
//! mapping.
//!
//! Under [`Rules::Macos`] pages are 16 KiB (macOS on arm64) for the engine
//! and the fake kernel alike, and the traced (4 KiB-aligned) addresses are
//! taken four times as far from 0: aligned to 16 KiB, in the same order,
//! and each mapping still clear of the next one once its length is rounded
//! to 16 KiB.

use crate::lastmap::{FileMaps, Watched};
use crate::trace::{self, Rec};
use munmapq_core::config::Config;
use munmapq_core::engine::{Effect, Engine};
use munmapq_core::fake::{FakeOs, Traced, PAGE};
use munmapq_core::file::FileFacts;
use munmapq_core::os::{Errno, Mmap, Usage};
use munmapq_core::stats::Counter;
use std::cell::RefCell;
use std::collections::BTreeMap;

/// Most mappings a replayed process holds at once: more than the kernel
/// lets a process have (`vm.max_map_count`), and the windows the replayed
/// policy queues.
const MAPPINGS: usize = 1 << 17;

/// What replaying one process under one policy gave.
pub struct Outcome {
    pub misses: u64,
    pub evict_munmaps: u64,
    pub peak_bytes: u64,
    pub deferred: u64,
    pub stats_line: String,
    /// The byte cap before each record.
    pub caps: Vec<usize>,
    /// Eligible mmaps the program made (window maps).
    pub window_maps: u64,
    /// Files whose last mapping a real munmap removed ([`crate::lastmap`]).
    pub last_unmaps: u64,
    /// Files still mapped after the last record: the exit tears them down.
    pub mapped_at_end: u64,
}

/// Which system's rules the engine and the fake kernel follow.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Rules {
    /// As traced: 4 KiB pages.
    Linux,
    /// macOS on arm64: 16 KiB pages, no map-count limit, and no resident
    /// budget: a queued mapping's pages are clean file pages outside the
    /// footprint the system charges, so the library neither drops nor
    /// unmaps them for memory (`drops_free_memory` false in
    /// `interpose/src/macos/os.rs`).
    Macos,
    /// An older macOS library, which kept the resident budget and could
    /// not drop pages: over the budget the queue unmaps its oldest
    /// mappings.
    MacosUnmap,
}

impl Rules {
    pub fn page(self) -> usize {
        match self {
            Rules::Linux => PAGE,
            Rules::Macos | Rules::MacosUnmap => 16 << 10,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Rules::Linux => "linux",
            Rules::Macos => "macos",
            Rules::MacosUnmap => "macos-unmap",
        }
    }

    /// Whether dropping a queued mapping's pages frees memory the system
    /// charges, so that a resident budget is kept (see [`Rules::Macos`]).
    fn drops_free_memory(self) -> bool {
        self != Rules::Macos
    }

    /// Where the replay puts what the traced program had at `addr`, when
    /// no replayed mapping says otherwise.
    fn place(self, addr: usize) -> usize {
        addr * (self.page() / PAGE)
    }
}

/// The real engine on one process's records.
pub fn run(recs: &[Rec], cfg: Config, pid: u32, rules: Rules) -> Outcome {
    let engine = Engine::new();
    engine.start(&cfg, rules.page());
    // The replay measures the queue's policy: every eligible mapping meets
    // it (the library's pass-through of small mappings that do not pay,
    // core/src/payoff.rs, would hide their misses).
    engine.set_steps_aside(false);
    let mut replay = Replay::new(rules);
    let mut caps = Vec::with_capacity(recs.len());
    for r in recs {
        caps.push(engine.byte_cap().expect("one thread: the table is free"));
        replay.apply(&engine, r);
    }
    let s = &engine.stats;
    let g = |c| s.get(c);
    let mut buf = [0u8; 1024];
    let n = s.write_line(pid as u64, &mut buf);
    let maps = replay.maps.take();
    Outcome {
        misses: g(Counter::Eligible) - g(Counter::Reused),
        evict_munmaps: g(Counter::MunmapSyscalls)
            - g(Counter::PassUntracked)
            - g(Counter::Released),
        peak_bytes: g(Counter::PeakQueuedBytes),
        deferred: g(Counter::Deferred),
        stats_line: String::from_utf8_lossy(&buf[..n]).into_owned(),
        caps,
        window_maps: g(Counter::Eligible),
        last_unmaps: maps.last_unmaps,
        mapped_at_end: maps.files_mapped(),
    }
}

struct Replay {
    os: FakeOs<MAPPINGS>,
    /// Traced start -> (length, replayed start).
    xlate: BTreeMap<usize, (usize, usize)>,
    /// Which file each replayed mapping shows.
    maps: RefCell<FileMaps>,
    rules: Rules,
}

impl Replay {
    fn new(rules: Rules) -> Self {
        let mut os = FakeOs::new();
        os.page = rules.page();
        // The trace does not record the process's mapping count nor its
        // address-space limit: the count is the replay's own mappings (a
        // readable /proc, as the traced run had, whose room under
        // `vm.max_map_count` a program's few hundred other mappings do not
        // bind; the count cap is replayed). Dropping pages changes no
        // counter a replay compares. The resident set is the one the traced
        // run had at each munmap (its records carry it).
        os.map_count = Some(0);
        os.can_drop = rules != Rules::MacosUnmap;
        os.usage = Some(Usage {
            size: 0,
            resident: 0,
            peak: None,
        });
        Replay {
            os,
            xlate: BTreeMap::new(),
            maps: RefCell::default(),
            rules,
        }
    }

    /// Where the replay has what the traced program had at `addr`.
    fn translate(&self, addr: usize) -> usize {
        match self.xlate.range(..=addr).next_back() {
            Some((&s, &(len, to))) if addr < s + len => to + (addr - s),
            _ => self.rules.place(addr),
        }
    }

    /// Replays one record on `engine`.
    fn apply(&mut self, engine: &Engine, r: &Rec) {
        self.os.traced = Some(Traced {
            result: if r.result >= 0 {
                self.rules.place(r.result as usize) as i64
            } else {
                r.result
            },
            // A trace records which file, not its stamp: files are taken as
            // unchanged during the traced run.
            file: (r.ino != 0).then_some(FileFacts {
                dev: r.dev,
                ino: r.ino,
                mnt: 0,
                nlink: 1,
                name: 0,
                stamp: Default::default(),
            }),
        });
        if r.rss != 0 {
            self.os.usage = Some(Usage {
                size: 0,
                resident: r.rss as usize,
                peak: None,
            });
        }
        let os = &Watched {
            os: &self.os,
            maps: &self.maps,
            drops_free_memory: self.rules.drops_free_memory(),
        };
        match r.kind {
            trace::KIND_MMAP => {
                let addr = if r.addr == 0 {
                    0
                } else {
                    self.translate(r.addr)
                };
                let got = engine.mmap(os, Mmap::new(addr, r.len, r.prot, r.flags, r.fd, r.off));
                if let (Ok(to), true) = (got, r.result >= 0) {
                    let from = r.result as usize;
                    let len = r.len.div_ceil(PAGE) * PAGE;
                    let stale: Vec<usize> = self
                        .xlate
                        .range(..from + len)
                        .rev()
                        .take_while(|(s, (l, _))| *s + *l > from)
                        .map(|(s, _)| *s)
                        .collect();
                    for s in stale {
                        self.xlate.remove(&s);
                    }
                    self.xlate.insert(from, (len, to));
                }
            }
            trace::KIND_CLOSE => {
                let c = engine.closing(os, r.fd, r.off as i32);
                engine.closed(c, r.result == 0);
            }
            trace::KIND_MUNMAP => {
                let _ = engine.munmap(os, self.translate(r.addr), r.len);
                if r.result == 0 {
                    self.xlate.remove(&r.addr);
                }
            }
            trace::KIND_MODIFY | trace::KIND_INSPECT => {
                let effect = if r.kind == trace::KIND_MODIFY {
                    Effect::Modify
                } else {
                    Effect::Inspect
                };
                let span = engine.span(self.translate(r.addr), r.len, effect);
                let _ = engine.range_call(os, &[span], || Ok::<_, Errno>(0));
            }
            trace::KIND_LOCK_ALL => {
                let _ = engine.lock_all(os, r.flags & libc::MCL_FUTURE != 0, || Ok::<_, Errno>(0));
            }
            _ => {}
        }
        self.os.traced = None;
    }
}
