//! `mq-probe random DIR SEED OPS`: a seeded random sequence of memory
//! calls, each logged with its result (value or errno) and a checksum of the
//! data it read, never an address. Run with and without libmunmapq, the two
//! logs must be identical.
//!
//! Calls on memory the program already unmapped happen right after the
//! munmap, in the same step: later, the kernel may have placed something
//! else there in one run and not the other (munmapq keeps freed ranges
//! mapped), and touching it would then be a program bug, not a finding.

use crate::sys::*;

const FILES: usize = 3;
const FILE_PAGES: usize = 64;

#[derive(Clone, Copy)]
struct Handle {
    addr: usize,
    len: usize,
    /// File index and page offset, or None for anonymous memory.
    file: Option<(usize, usize)>,
    writable: bool,
}

fn file_byte(k: usize, pos: usize) -> u8 {
    pattern(pos) ^ (k as u8).wrapping_mul(0x55)
}

fn checksum(h: &Handle) -> u64 {
    let pg = page();
    let mut sum = 0xcbf2_9ce4_8422_2325u64;
    let mut i = 0;
    while i < h.len {
        sum = (sum ^ peek(h.addr, i) as u64).wrapping_mul(0x0100_0000_01b3);
        i += pg / 4 + 7;
    }
    sum
}

pub fn run(dir: &str, seed: u64, ops: usize) -> i32 {
    let pg = page();
    let mut fds = Vec::new();
    for k in 0..FILES {
        let path = format!("{dir}/random-{k}.bin");
        let size = std::fs::metadata(&path).map(|m| m.len() as usize).ok();
        if size != Some(FILE_PAGES * pg) {
            let data: Vec<u8> = (0..FILE_PAGES * pg).map(|p| file_byte(k, p)).collect();
            std::fs::write(&path, data).unwrap();
        }
        fds.push(open(&path, libc::O_RDONLY));
    }
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut live: Vec<Handle> = Vec::new();
    let log = |line: String| println!("{line}");
    for step in 0..ops {
        let r = rng.below(100);
        let pick = |rng: &mut Rng, live: &Vec<Handle>| {
            (!live.is_empty()).then(|| rng.below(live.len() as u64) as usize)
        };
        match r {
            // Eligible mappings, often of windows seen before (reuse).
            0..=29 => {
                let k = rng.below(FILES as u64) as usize;
                let pages = 1 + rng.below(4) as usize;
                let first = rng.below(8) as usize * 2;
                let res = map_file(fds[k], first * pg, pages * pg);
                log(format!(
                    "{step} map file{k} @{first}+{pages}: {}",
                    show(res, false)
                ));
                if let Ok(addr) = res {
                    let h = Handle {
                        addr,
                        len: pages * pg,
                        file: Some((k, first)),
                        writable: false,
                    };
                    log(format!("{step}   sum {:x}", checksum(&h)));
                    live.push(h);
                }
            }
            // Ineligible ones: anonymous, writable private, shared.
            30..=37 => {
                let pages = 1 + rng.below(3) as usize;
                let (desc, res, file, writable) = match rng.below(3) {
                    0 => (
                        "anon rw",
                        mmap(
                            0,
                            pages * pg,
                            R | libc::PROT_WRITE,
                            P | libc::MAP_ANONYMOUS,
                            -1,
                            0,
                            false,
                        ),
                        None,
                        true,
                    ),
                    1 => (
                        "file rw private",
                        mmap(0, pages * pg, R | libc::PROT_WRITE, P, fds[0], 0, true),
                        Some((0, 0)),
                        true,
                    ),
                    _ => (
                        "file shared",
                        mmap(0, pages * pg, R, libc::MAP_SHARED, fds[1], 0, false),
                        Some((1, 0)),
                        false,
                    ),
                };
                log(format!("{step} map {desc} {pages}: {}", show(res, false)));
                if let Ok(addr) = res {
                    live.push(Handle {
                        addr,
                        len: pages * pg,
                        file,
                        writable,
                    });
                }
            }
            // Whole unmap, then (same step) something on the freed range.
            38..=59 => {
                let Some(i) = pick(&mut rng, &live) else {
                    continue;
                };
                let h = live.swap_remove(i);
                log(format!(
                    "{step} munmap whole: {}",
                    show(munmap(h.addr, h.len), true)
                ));
                let (a, l) = (h.addr, h.len);
                let what = rng.below(10);
                let res = match what {
                    0 => show(munmap(a, l), true),
                    1 => show(mprotect(a, pg, R), true),
                    2 => show(madvise(a, pg, libc::MADV_WILLNEED), true),
                    3 => show(msync(a, l), true),
                    4 => show(mincore(a, l), true),
                    #[cfg(target_os = "linux")]
                    5 => show(
                        mremap(a, pg, 2 * pg, libc::MREMAP_MAYMOVE, 0).map(drop),
                        false,
                    ),
                    #[cfg(not(target_os = "linux"))]
                    5 => "skip".into(),
                    6 | 7 => {
                        // MAP_FIXED where there is no MAP_FIXED_NOREPLACE.
                        let flag = match fixed_noreplace() {
                            Some(noreplace) if what == 7 => noreplace,
                            _ => libc::MAP_FIXED,
                        };
                        let res = mmap(
                            a,
                            l,
                            R | libc::PROT_WRITE,
                            P | libc::MAP_ANONYMOUS | flag,
                            -1,
                            0,
                            false,
                        );
                        if let Ok(x) = res {
                            let nh = Handle {
                                addr: x,
                                len: l,
                                file: None,
                                writable: true,
                            };
                            poke(x, 1, step as u8);
                            live.push(nh);
                        }
                        show(res.map(|x| x == a), true)
                    }
                    8 => {
                        // Map the same window again: munmapq hands back the
                        // queued one; the data must be the file's.
                        match h.file {
                            Some((k, first)) if !h.writable => {
                                let res = map_file(fds[k], first * pg, l);
                                if let Ok(x) = res {
                                    let nh = Handle {
                                        addr: x,
                                        len: l,
                                        ..h
                                    };
                                    live.push(nh);
                                    format!("remapped sum {:x}", checksum(&nh))
                                } else {
                                    show(res, false)
                                }
                            }
                            _ => "skip".into(),
                        }
                    }
                    _ => show(mlock(a, pg), true),
                };
                log(format!("{step}   freed op {what}: {res}"));
            }
            // Partial unmap: first or last page.
            60..=65 => {
                let Some(i) = pick(&mut rng, &live) else {
                    continue;
                };
                let h = live[i];
                if h.len < 2 * pg {
                    continue;
                }
                let head = rng.below(2) == 0;
                let at = if head { h.addr } else { h.addr + h.len - pg };
                log(format!(
                    "{step} munmap {}: {}",
                    if head { "head" } else { "tail" },
                    show(munmap(at, pg), true)
                ));
                log(format!("{step}   hole: {}", show(mincore(at, pg), true)));
                let rest = if head { h.addr + pg } else { h.addr };
                let file = h.file.map(|(k, f)| (k, if head { f + 1 } else { f }));
                live[i] = Handle {
                    addr: rest,
                    len: h.len - pg,
                    file,
                    ..h
                };
                log(format!("{step}   rest sum {:x}", checksum(&live[i])));
            }
            // Invalid munmaps.
            66..=68 => {
                let Some(i) = pick(&mut rng, &live) else {
                    continue;
                };
                let h = live[i];
                log(format!(
                    "{step} munmap unaligned: {}",
                    show(munmap(h.addr + 1, pg), true)
                ));
                log(format!(
                    "{step} munmap zero: {}",
                    show(munmap(h.addr, 0), true)
                ));
            }
            // mprotect a live mapping; write if it became writable.
            69..=75 => {
                let Some(i) = pick(&mut rng, &live) else {
                    continue;
                };
                let rw = rng.below(2) == 0;
                let h = live[i];
                let res = mprotect(h.addr, h.len, if rw { R | libc::PROT_WRITE } else { R });
                log(format!(
                    "{step} mprotect {}: {}",
                    if rw { "rw" } else { "r" },
                    show(res, true)
                ));
                if res.is_ok() {
                    live[i].writable = rw || h.writable;
                    if rw {
                        poke(h.addr, 3, 0xA5);
                    }
                }
                log(format!("{step}   sum {:x}", checksum(&live[i])));
            }
            // madvise a live mapping (can split it in the kernel).
            76..=80 => {
                let Some(i) = pick(&mut rng, &live) else {
                    continue;
                };
                let h = live[i];
                let advice = [
                    libc::MADV_RANDOM,
                    libc::MADV_SEQUENTIAL,
                    libc::MADV_WILLNEED,
                    libc::MADV_NORMAL,
                ][rng.below(4) as usize];
                log(format!(
                    "{step} madvise {advice}: {}",
                    show(madvise(h.addr, pg, advice), true)
                ));
            }
            // mremap a live mapping: grow, shrink, or move it (Linux).
            #[cfg(not(target_os = "linux"))]
            81..=87 => continue,
            #[cfg(target_os = "linux")]
            81..=87 => {
                let Some(i) = pick(&mut rng, &live) else {
                    continue;
                };
                let h = live[i];
                let new_len = match rng.below(3) {
                    0 => h.len + pg,
                    1 if h.len > pg => h.len - pg,
                    _ => h.len,
                };
                let res = mremap(h.addr, h.len, new_len, libc::MREMAP_MAYMOVE, 0);
                log(format!(
                    "{step} mremap {} -> {}: {}",
                    h.len / pg,
                    new_len / pg,
                    show(res.map(drop), false)
                ));
                if let Ok(x) = res {
                    // Growth of a file mapping past the old end stays the
                    // file's; only the common part is checked.
                    let keep = new_len.min(h.len);
                    live[i] = Handle {
                        addr: x,
                        len: new_len,
                        ..h
                    };
                    let part = Handle {
                        len: keep,
                        ..live[i]
                    };
                    log(format!("{step}   sum {:x}", checksum(&part)));
                }
            }
            // Read one.
            88..=94 => {
                let Some(i) = pick(&mut rng, &live) else {
                    continue;
                };
                log(format!("{step} read sum {:x}", checksum(&live[i])));
            }
            // fork: the child maps, reads, unmaps and reports by exit code.
            _ => {
                // SAFETY: the child only calls the hooked functions and reads,
                // then _exits.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    let mut sum = 0u64;
                    for j in 0..20 {
                        let k = j % FILES;
                        if let Ok(a) = map_file(fds[k], (j % 8) * 2 * pg, pg) {
                            sum = sum.wrapping_add(peek(a, j) as u64);
                            let _ = munmap(a, pg);
                        }
                    }
                    for h in &live {
                        sum = sum.wrapping_add(checksum(h) & 0xff);
                    }
                    // SAFETY: ends the child.
                    unsafe { libc::_exit((sum % 251) as i32) };
                }
                let mut status = 0;
                // SAFETY: waiting for our own child.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                log(format!(
                    "{step} fork child exit {}",
                    libc::WEXITSTATUS(status)
                ));
            }
        }
    }
    for h in live {
        let _ = munmap(h.addr, h.len);
    }
    0
}
