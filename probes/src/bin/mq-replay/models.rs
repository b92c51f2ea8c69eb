//! Exact LRU and Belady's OPT over a trace's window sequence, and reuse
//! distances.

use crate::trace::{self, Rec};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// (dev, ino, offset, page-rounded length): what a queued window can be
/// reused for, as the engine's `FileKey`.
pub type Key = (u64, u64, i64, usize);

#[derive(Clone, Copy)]
pub enum WindowEvent {
    /// An eligible mmap.
    Map(Key),
    /// The program unmapped a whole eligible mapping; `.1` indexes the
    /// record (for the byte cap in force then).
    Unmap(Key, usize),
}

fn eligible(r: &Rec) -> Option<Key> {
    let rlen = r.len.div_ceil(4096) * 4096;
    (r.kind == trace::KIND_MMAP
        && r.addr == 0
        && r.prot == libc::PROT_READ
        && r.flags == libc::MAP_PRIVATE
        && r.fd >= 0
        && r.len > 0
        && r.off >= 0
        && (r.off as u64).is_multiple_of(4096)
        && r.ino != 0
        && r.result >= 0)
        .then_some((r.dev, r.ino, r.off, rlen))
}

/// The window maps and whole-window unmaps of one process.
pub fn windows(recs: &[Rec]) -> Vec<WindowEvent> {
    let mut live: BTreeMap<usize, Key> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let rlen = r.len.div_ceil(4096) * 4096;
        let drop_overlaps = |start: usize, len: usize, live: &mut BTreeMap<usize, Key>| {
            let hit: Vec<usize> = live
                .range(..start + len)
                .rev()
                .take_while(|(s, k)| *s + k.3 > start)
                .map(|(s, _)| *s)
                .collect();
            for s in hit {
                live.remove(&s);
            }
        };
        match r.kind {
            trace::KIND_MMAP if r.result >= 0 => {
                drop_overlaps(r.result as usize, rlen, &mut live);
                if let Some(k) = eligible(r) {
                    out.push(WindowEvent::Map(k));
                    live.insert(r.result as usize, k);
                }
            }
            trace::KIND_MUNMAP => match live.get(&r.addr) {
                Some(k) if k.3 == rlen => {
                    out.push(WindowEvent::Unmap(*k, i));
                    live.remove(&r.addr);
                }
                _ => drop_overlaps(r.addr, rlen, &mut live),
            },
            trace::KIND_MODIFY => drop_overlaps(r.addr, rlen, &mut live),
            _ => {}
        }
    }
    out
}

#[derive(Default)]
pub struct Counts {
    pub misses: u64,
    pub evict_munmaps: u64,
    pub peak_bytes: u64,
    pub deferred: u64,
}

/// A map of `k`, in either model: the last queued window of its key is
/// reused (`dequeue` takes it out of the model's queue), or it is a miss.
fn reuse<E, R>(
    k: Key,
    by_key: &mut HashMap<Key, Vec<E>>,
    bytes: &mut usize,
    c: &mut Counts,
    dequeue: impl FnOnce(E) -> R,
) {
    match by_key.get_mut(&k).and_then(|v| v.pop()) {
        Some(e) => {
            dequeue(e);
            *bytes -= k.3;
        }
        None => c.misses += 1,
    }
}

/// Exact LRU: evicts the least recently unmapped window, one munmap each,
/// just enough to fit.
pub fn lru(ws: &[WindowEvent], caps: &[usize], max_n: usize) -> Counts {
    let mut c = Counts::default();
    let mut queue: BTreeMap<u64, Key> = BTreeMap::new();
    let mut by_key: HashMap<Key, Vec<u64>> = HashMap::new();
    let (mut bytes, mut seq) = (0usize, 0u64);
    for w in ws {
        match *w {
            WindowEvent::Map(k) => reuse(k, &mut by_key, &mut bytes, &mut c, |s| queue.remove(&s)),
            // Larger than the cap: never queued.
            WindowEvent::Unmap(k, i) if k.3 > caps[i] => {}
            WindowEvent::Unmap(k, i) => {
                let cap = caps[i];
                while bytes + k.3 > cap || queue.len() >= max_n {
                    let (s, old) = queue.pop_first().unwrap();
                    by_key.get_mut(&old).unwrap().retain(|x| *x != s);
                    bytes -= old.3;
                    c.evict_munmaps += 1;
                }
                queue.insert(seq, k);
                by_key.entry(k).or_default().push(seq);
                seq += 1;
                bytes += k.3;
                c.deferred += 1;
                c.peak_bytes = c.peak_bytes.max(bytes as u64);
            }
        }
    }
    c
}

/// Belady's OPT: when the queue is full, drops whichever of the queued
/// windows and the incoming one is mapped again furthest in the future
/// (never = furthest). With windows of one size this is the optimum.
pub fn opt(ws: &[WindowEvent], caps: &[usize], max_n: usize) -> Counts {
    // Next map of the same key after each unmap.
    let mut next = vec![usize::MAX; ws.len()];
    let mut seen: HashMap<Key, usize> = HashMap::new();
    for (j, w) in ws.iter().enumerate().rev() {
        match *w {
            WindowEvent::Map(k) => {
                seen.insert(k, j);
            }
            WindowEvent::Unmap(k, _) => next[j] = seen.get(&k).copied().unwrap_or(usize::MAX),
        }
    }
    let mut c = Counts::default();
    let mut queue: BTreeSet<(usize, usize)> = BTreeSet::new(); // (next use, unmap index)
    let mut by_key: HashMap<Key, Vec<(usize, usize)>> = HashMap::new();
    let mut bytes = 0usize;
    for (j, w) in ws.iter().enumerate() {
        match *w {
            WindowEvent::Map(k) => reuse(k, &mut by_key, &mut bytes, &mut c, |e| queue.remove(&e)),
            // Larger than the cap: never queued.
            WindowEvent::Unmap(k, i) if k.3 > caps[i] => {}
            WindowEvent::Unmap(k, i) => {
                let cap = caps[i];
                let me = (next[j], j);
                let mut keep = true;
                while bytes + k.3 > cap || queue.len() >= max_n {
                    let far = *queue.last().unwrap();
                    if far < me {
                        keep = false;
                        break;
                    }
                    queue.remove(&far);
                    let ws_key = match ws[far.1] {
                        WindowEvent::Unmap(key, _) => key,
                        WindowEvent::Map(key) => key,
                    };
                    by_key.get_mut(&ws_key).unwrap().retain(|x| *x != far);
                    bytes -= ws_key.3;
                    c.evict_munmaps += 1;
                }
                if !keep {
                    c.evict_munmaps += 1;
                    continue;
                }
                queue.insert(me);
                by_key.entry(k).or_default().push(me);
                bytes += k.3;
                c.deferred += 1;
                c.peak_bytes = c.peak_bytes.max(bytes as u64);
            }
        }
    }
    c
}

/// Window maps, distinct windows, and the p50 and p95 reuse distance: for
/// each map of a window unmapped before, the bytes of other distinct
/// windows unmapped since its last unmap.
pub fn reuse_distances(ws: &[WindowEvent]) -> (usize, usize, u64, u64) {
    let n = ws.len();
    let mut tree = vec![0i64; n + 1];
    let add = |tree: &mut Vec<i64>, mut i: usize, v: i64| {
        i += 1;
        while i <= n {
            tree[i] += v;
            i += i & i.wrapping_neg();
        }
    };
    let sum = |tree: &Vec<i64>, mut i: usize| {
        let mut s = 0;
        while i > 0 {
            s += tree[i];
            i -= i & i.wrapping_neg();
        }
        s
    };
    let mut last: HashMap<Key, usize> = HashMap::new();
    let mut distinct: BTreeSet<Key> = BTreeSet::new();
    let (mut d, mut maps) = (Vec::new(), 0);
    for (j, w) in ws.iter().enumerate() {
        match *w {
            WindowEvent::Map(k) => {
                maps += 1;
                distinct.insert(k);
                if let Some(&p) = last.get(&k) {
                    d.push((sum(&tree, j) - sum(&tree, p + 1)) as u64);
                }
            }
            WindowEvent::Unmap(k, _) => {
                if let Some(p) = last.insert(k, j) {
                    add(&mut tree, p, -(k.3 as i64));
                }
                add(&mut tree, j, k.3 as i64);
            }
        }
    }
    d.sort_unstable();
    let pct = |q: usize| d.get(d.len() * q / 100).copied().unwrap_or(0);
    (maps, distinct.len(), pct(50), pct(95))
}
