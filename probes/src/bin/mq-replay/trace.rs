//! Reads `MUNMAPQ_TRACE` files: 80-byte records, written and read by the
//! one definition in `munmapq_core::trace`.

pub use munmapq_core::trace::{
    Record as Rec, KIND_CLOSE, KIND_INSPECT, KIND_LOCK_ALL, KIND_MMAP, KIND_MODIFY, KIND_MUNMAP,
    RECORD_BYTES,
};

/// Records per process, in the order processes first appear; a trailing
/// partial record (a write cut short) is ignored.
pub fn by_process(data: &[u8]) -> Vec<(u32, Vec<Rec>)> {
    let mut out: Vec<(u32, Vec<Rec>)> = Vec::new();
    for chunk in data.chunks_exact(RECORD_BYTES) {
        let r = Rec::decode(chunk.try_into().expect("whole records"));
        match out.iter_mut().find(|(p, _)| *p == r.pid) {
            Some((_, v)) => v.push(r),
            None => out.push((r.pid, vec![r])),
        }
    }
    out
}
