//! Reads `MUNMAPQ_TRACE` files: 80-byte little-endian records, layout in
//! `interpose/src/trace.rs`.

pub const RECORD_BYTES: usize = 80;
pub const KIND_MMAP: u32 = 1;
pub const KIND_MUNMAP: u32 = 2;
pub const KIND_MODIFY: u32 = 3;
pub const KIND_INSPECT: u32 = 4;
pub const KIND_LOCK_ALL: u32 = 5;

#[derive(Clone, Copy, Debug)]
pub struct Rec {
    pub kind: u32,
    pub pid: u32,
    pub addr: usize,
    pub len: usize,
    pub prot: i32,
    pub flags: i32,
    pub fd: i32,
    pub dev: u64,
    pub ino: u64,
    pub off: i64,
    pub result: i64,
    pub peak_rss: u64,
}

pub fn parse(b: &[u8]) -> Rec {
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    let w = |k: usize| u64::from_le_bytes(b[8 + 8 * k..16 + 8 * k].try_into().unwrap());
    Rec {
        kind: u32_at(0),
        pid: u32_at(4),
        addr: w(0) as usize,
        len: w(1) as usize,
        prot: w(2) as u32 as i32,
        flags: (w(2) >> 32) as u32 as i32,
        fd: w(3) as u32 as i32,
        dev: w(4),
        ino: w(5),
        off: w(6) as i64,
        result: w(7) as i64,
        peak_rss: w(8),
    }
}

/// Records per process, in the order processes first appear; a trailing
/// partial record (a write cut short) is ignored.
pub fn by_process(data: &[u8]) -> Vec<(u32, Vec<Rec>)> {
    let mut out: Vec<(u32, Vec<Rec>)> = Vec::new();
    for chunk in data.chunks_exact(RECORD_BYTES) {
        let r = parse(chunk);
        match out.iter_mut().find(|(p, _)| *p == r.pid) {
            Some((_, v)) => v.push(r),
            None => out.push((r.pid, vec![r])),
        }
    }
    out
}
