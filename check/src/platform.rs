//! The library's platform facts, stated once for the launcher and the
//! integration tests (which cannot use the launcher's modules): its file
//! name and the variable that preloads it (dyld's on macOS, ld.so's
//! elsewhere).

#[cfg(target_os = "macos")]
pub const LIB_NAME: &str = "libmunmapq.dylib";
#[cfg(not(target_os = "macos"))]
pub const LIB_NAME: &str = "libmunmapq.so";

#[cfg(target_os = "macos")]
pub const PRELOAD_VAR: &str = "DYLD_INSERT_LIBRARIES";
#[cfg(not(target_os = "macos"))]
pub const PRELOAD_VAR: &str = "LD_PRELOAD";
