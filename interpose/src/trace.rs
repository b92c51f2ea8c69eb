//! Opt-in call trace (`MUNMAPQ_TRACE=path`): one fixed-size binary record
//! per hooked call, for `mq-replay` to run any eviction policy on.
//!
//! The file is opened once, at load time, with `O_APPEND`; each record is
//! one `write(2)` of [`RECORD_BYTES`] bytes from the stack: no allocation,
//! no printing, no lock. On a regular file Linux positions an `O_APPEND`
//! write at the end and writes it under the inode lock (fs/ext4/file.c
//! `ext4_file_write_iter`, mm/filemap.c `generic_file_write_iter`: lock, then
//! `generic_write_checks` moves an `IOCB_APPEND` write to the file's size),
//! so processes and threads appending to one trace interleave whole records,
//! never parts of them (tests/trace.rs checks it with 21 processes).
//!
//! Fork: the child shares the parent's open file (same description, still
//! `O_APPEND`) and keeps appending; the fork handler refreshes the pid each
//! record carries, so the replayer can tell processes apart. Exec: the fd is
//! close-on-exec; the new program's copy of the library opens the file again
//! from the variable. A failed write is ignored (the trace is then short, the
//! program unaffected).
//!
//! Layout, little-endian, 80 bytes (see `probes/src/replay.rs`, which reads
//! it): kind u32, pid u32, addr u64, len u64, prot i32, flags i32, fd i32,
//! pad u32, dev u64, ino u64, off i64, result i64 (address or 0; `-errno` on
//! failure), peak RSS in bytes u64 (munmap records only: what a flush at that
//! call would have seen).

use core::sync::atomic::{AtomicI32, AtomicU32, Ordering::Relaxed};

pub use munmapq_core::config::VAR_TRACE;
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

static FD: AtomicI32 = AtomicI32::new(-1);
static PID: AtomicU32 = AtomicU32::new(0);

/// One call, as the program made it and what it got back.
#[derive(Clone, Copy, Default)]
pub struct Record {
    pub kind: u32,
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

/// Opens the trace file named by `path` (called once, from the constructor).
pub fn open(path: &[u8]) {
    let mut name = [0u8; 4096];
    if path.is_empty() || path.len() >= name.len() {
        return;
    }
    name[..path.len()].copy_from_slice(path);
    // SAFETY: `name` is NUL-terminated.
    let fd = unsafe {
        libc::open(
            name.as_ptr().cast(),
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd >= 0 {
        refresh_pid();
        FD.store(fd, Relaxed);
    }
}

pub fn enabled() -> bool {
    FD.load(Relaxed) >= 0
}

/// In a child after fork: its records carry its own pid.
pub fn refresh_pid() {
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() } as u32, Relaxed);
}

/// Appends one record (a no-op unless tracing).
pub fn write(r: &Record) {
    let fd = FD.load(Relaxed);
    if fd < 0 {
        return;
    }
    let mut b = [0u8; RECORD_BYTES];
    let words: [u64; 9] = [
        r.addr as u64,
        r.len as u64,
        (r.prot as u32 as u64) | ((r.flags as u32 as u64) << 32),
        r.fd as u32 as u64,
        r.dev,
        r.ino,
        r.off as u64,
        r.result as u64,
        r.peak_rss,
    ];
    b[0..4].copy_from_slice(&r.kind.to_le_bytes());
    b[4..8].copy_from_slice(&PID.load(Relaxed).to_le_bytes());
    for (i, w) in words.iter().enumerate() {
        b[8 + 8 * i..16 + 8 * i].copy_from_slice(&w.to_le_bytes());
    }
    // SAFETY: `b` is valid for its length; a failed or short write only
    // shortens the trace.
    unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) };
}

/// Resident set in bytes now, for munmap records (only asked when
/// tracing): what the sizing rule reads (see `munmapq_core::sizing`).
pub fn peak_rss() -> u64 {
    crate::usage::usage().map_or(0, |u| u.resident) as u64
}

/// A range call's record.
pub fn range(kind: u32, addr: usize, len: usize, result: i64) {
    if enabled() {
        write(&Record {
            kind,
            addr,
            len,
            result,
            ..Record::default()
        });
    }
}
