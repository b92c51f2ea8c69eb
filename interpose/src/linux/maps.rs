//! Linux: the process's mappings, from `/proc/self/maps` (read as
//! `proc.rs` reads: open, read, close), counted for the sizing rule and
//! listed where records of busy calls were lost (`munmapq_core::engine`).
//! The map count has no cheaper source: the lines are counted, a cost
//! that grows with the number of mappings.

use core::sync::atomic::{
    AtomicBool,
    Ordering::{Acquire, Release},
};
use munmapq_core::maps_text::Lines;
use munmapq_core::os::Region;

/// The buffer `/proc/self/maps` is read into: a page (a smaller one
/// would cost a `read` per few dozen mappings), and not on the stack (a
/// hook may run on a signal stack of a few KiB). Claimed with
/// [`MAPS_BUFFER_TAKEN`]: its one user is the table's holder, so a claim
/// that fails (a handler that interrupted a reader) answers "unknown".
struct MapsBuffer(core::cell::UnsafeCell<[u8; 4096]>);

// SAFETY: used only by the thread that set `MAPS_BUFFER_TAKEN`.
unsafe impl Sync for MapsBuffer {}

static MAPS_BUFFER: MapsBuffer = MapsBuffer(core::cell::UnsafeCell::new([0; 4096]));
static MAPS_BUFFER_TAKEN: AtomicBool = AtomicBool::new(false);

/// Reads `/proc/self/maps` into the claimed buffer, handing each read's
/// text to `take`. None if the buffer or the file cannot be had.
fn read_maps(take: impl FnMut(&[u8]) -> bool) -> Option<()> {
    if MAPS_BUFFER_TAKEN.swap(true, Acquire) {
        return None;
    }
    // SAFETY: claimed above, given back below: no other reference exists.
    let buf = unsafe { &mut *MAPS_BUFFER.0.get() };
    let r = super::proc::read(c"/proc/self/maps", buf, take);
    MAPS_BUFFER_TAKEN.store(false, Release);
    r
}

/// Lines of `/proc/self/maps`: one per mapping.
pub fn map_count() -> Option<usize> {
    let mut lines = 0;
    read_maps(|text| {
        lines += text.iter().filter(|&&c| c == b'\n').count();
        true
    })?;
    Some(lines)
}

/// Hands `f` each mapping, in address order. `f` may unmap one it was
/// handed: the kernel goes on from the address the last read ended at.
pub fn each_region(mut f: impl FnMut(Region)) -> Option<()> {
    let mut lines = Lines::new();
    let mut understood = true;
    read_maps(|text| {
        understood = lines.feed(text, &mut f);
        understood
    })?;
    (understood && lines.ended()).then_some(())
}
