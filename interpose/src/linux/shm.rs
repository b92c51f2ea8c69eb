//! Where glibc's `shm_open` and `shm_unlink` put a POSIX shared memory
//! object's file, for the `shm_unlink` hook (`lastclose.rs`) and its
//! stand-in (`real.rs`).

use libc::c_char;

/// Where glibc keeps POSIX shared memory objects (`shm_open` creates
/// `/dev/shm/NAME`, glibc 2.34 and later; older ones looked the tmpfs up,
/// and it is `/dev/shm` on every common system).
const SHM_DIR: &[u8] = b"/dev/shm/";

/// A buffer for [`shm_path`].
pub type ShmPath = [u8; SHM_DIR.len() + libc::NAME_MAX as usize + 1];

/// Writes the NUL-terminated path of the shared memory object `name` into
/// `buf` as glibc forms it (leading slashes stripped); false for a name
/// glibc refuses (empty, another slash, too long).
pub fn shm_path(name: *const c_char, buf: &mut ShmPath) -> bool {
    if name.is_null() {
        return false;
    }
    // The caller's NUL-terminated name (glibc reads it too), measured here:
    // `CStr::from_ptr`, or a plain loop the compiler would make one, calls
    // `strlen`, which would be bound at load.
    let mut len = 0;
    // SAFETY: stops at the NUL.
    while unsafe { name.add(len).cast::<u8>().read_volatile() } != 0 {
        len += 1;
    }
    // SAFETY: `len` bytes, all inside the string.
    let name = unsafe { core::slice::from_raw_parts(name.cast::<u8>(), len) };
    let name = &name[name.iter().take_while(|&&b| b == b'/').count()..];
    if name.is_empty() || name.contains(&b'/') || name.len() >= libc::NAME_MAX as usize {
        return false;
    }
    *buf = [0; SHM_DIR.len() + libc::NAME_MAX as usize + 1];
    buf[..SHM_DIR.len()].copy_from_slice(SHM_DIR);
    buf[SHM_DIR.len()..SHM_DIR.len() + name.len()].copy_from_slice(name);
    true
}
