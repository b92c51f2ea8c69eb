//! The `MUNMAPQ_TRACE` record, once: the library writes it
//! (`interpose/src/trace.rs`), `mq-replay` reads it
//! (`probes/src/bin/mq-replay/`).
//!
//! Layout, little-endian, 80 bytes: kind u32, pid u32, addr u64, len u64,
//! prot i32, flags i32, fd i32, pad u32, dev u64, ino u64, off i64, result
//! i64 (address or 0; `-errno` on failure), RSS in bytes u64 (munmap records
//! only: what the sizing rule would have read at that call; 0 where it
//! could not be read, as in a fork child before it execs, and a replay then
//! keeps the last).

pub const RECORD_BYTES: usize = 80;

/// Record kinds.
pub const KIND_MMAP: u32 = 1;
pub const KIND_MUNMAP: u32 = 2;
/// A range call that changes mappings (mprotect, madvise, mlock, mremap's old range).
pub const KIND_MODIFY: u32 = 3;
/// A range call that only needs the range as the program left it.
pub const KIND_INSPECT: u32 = 4;
/// mlockall (flags in `flags`).
pub const KIND_LOCK_ALL: u32 = 5;
/// A close-type call that ended the descriptors `fd` to `off` (close,
/// close_range, dup2 onto an open one, ...); `result` 0, or -1 where it
/// failed without closing anything.
pub const KIND_CLOSE: u32 = 6;

/// One call, as the program made it and what it got back.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Record {
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
    pub rss: u64,
}

impl Record {
    /// The record's 80 bytes (no allocation: the library writes them with
    /// one `write(2)` from inside a hook).
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        let words: [u64; 9] = [
            self.addr as u64,
            self.len as u64,
            (self.prot as u32 as u64) | ((self.flags as u32 as u64) << 32),
            self.fd as u32 as u64,
            self.dev,
            self.ino,
            self.off as u64,
            self.result as u64,
            self.rss,
        ];
        b[0..4].copy_from_slice(&self.kind.to_le_bytes());
        b[4..8].copy_from_slice(&self.pid.to_le_bytes());
        for (i, w) in words.iter().enumerate() {
            b[8 + 8 * i..16 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    pub fn decode(b: &[u8; RECORD_BYTES]) -> Record {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let w = |k: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[8 + 8 * k..16 + 8 * k]);
            u64::from_le_bytes(x)
        };
        Record {
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
            rss: w(8),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written() {
        let r = Record {
            kind: KIND_MUNMAP,
            pid: 4242,
            addr: 0x7f00_dead_b000,
            len: 1 << 30,
            prot: libc::PROT_READ,
            flags: -1,
            fd: -1,
            dev: 0x803,
            ino: u64::MAX,
            off: -4096,
            result: -(libc::ENOMEM as i64),
            rss: 123 << 20,
        };
        let b = r.encode();
        assert_eq!(Record::decode(&b), r);
        assert_eq!(&b[0..4], &KIND_MUNMAP.to_le_bytes());
        assert_eq!(&b[4..8], &4242u32.to_le_bytes());
    }
}
