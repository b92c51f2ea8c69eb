//! Opt-in call trace (`MUNMAPQ_TRACE=path`): one fixed-size binary record
//! per hooked call, for `mq-replay` to run any eviction policy on.
//!
//! The file is opened once, at load time, with `O_APPEND`; each record is
//! one `write(2)` of [`munmapq_core::trace::RECORD_BYTES`] bytes from the
//! stack: no allocation, no printing, no lock. On a regular file Linux positions an `O_APPEND`
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
//! The record and its layout: `munmapq_core::trace`.

use core::sync::atomic::{AtomicI32, AtomicU32, Ordering::Relaxed};

pub use munmapq_core::config::VAR_TRACE;
pub use munmapq_core::trace::{
    Record, KIND_INSPECT, KIND_LOCK_ALL, KIND_MMAP, KIND_MODIFY, KIND_MUNMAP,
};

static FD: AtomicI32 = AtomicI32::new(-1);
static PID: AtomicU32 = AtomicU32::new(0);

/// Opens the trace file named by `path` (called once, from the constructor).
pub fn open(path: &[u8]) {
    let mut name = [0u8; 4096];
    if path.is_empty() || path.len() >= name.len() {
        return;
    }
    name[..path.len()].copy_from_slice(path);
    // SAFETY: `name` is NUL-terminated.
    let fd = unsafe {
        crate::selfio::open(
            name.as_ptr().cast(),
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd >= 0 {
        refresh_pid();
        #[cfg(target_os = "linux")]
        crate::platform::proc::keep_statm();
        FD.store(fd, Relaxed);
        crate::ENGINE.trace_every_call();
    }
}

pub fn enabled() -> bool {
    FD.load(Relaxed) >= 0
}

/// In a child after fork: its records carry its own pid (and no resident
/// set: the file kept to read it is the parent's).
pub fn refresh_pid() {
    PID.store(crate::selfio::getpid() as u32, Relaxed);
    #[cfg(target_os = "linux")]
    crate::platform::proc::forget_kept_statm();
}

/// Appends one record (a no-op unless tracing).
pub fn write(r: &Record) {
    let fd = FD.load(Relaxed);
    if fd < 0 {
        return;
    }
    let b = Record {
        pid: PID.load(Relaxed),
        ..*r
    }
    .encode();
    // SAFETY: `b` is valid for its length; a failed or short write only
    // shortens the trace.
    unsafe { crate::selfio::write(fd, b.as_ptr().cast(), b.len()) };
}

/// Resident set in bytes now, for munmap records (only asked when
/// tracing): what the sizing rule reads (see `munmapq_core::sizing`).
/// Linux reads it through a file kept open (`proc::kept_resident`); 0 in a
/// fork child, whose kept file is its parent's.
pub fn current_rss() -> u64 {
    #[cfg(target_os = "linux")]
    let rss = crate::platform::proc::kept_resident();
    #[cfg(not(target_os = "linux"))]
    let rss = {
        use munmapq_core::os::Os;
        crate::platform::os::RealOs.usage().map(|u| u.resident)
    };
    rss.unwrap_or(0) as u64
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
