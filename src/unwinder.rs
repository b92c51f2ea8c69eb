//! The unwinder entry points Rust's standard library refers to, defined
//! here so that the launcher does not load libgcc_s.so.1 for them.
//!
//! The launcher is built with `panic = "abort"`: a panic never unwinds,
//! so the only callers left are std's landing pads (reached only while
//! unwinding, which never starts), its personality routine (called only
//! by an unwinder) and its backtrace printer. Without these definitions
//! the link takes them from libgcc_s, and every run of the launcher pays
//! for that library: one more file to map and relocate, and one more
//! object in every symbol lookup, before the launcher does anything (the
//! git wrapper runs in front of every git call). `--as-needed`, which
//! rustc passes, then leaves libgcc_s out. build.rs keeps these names out
//! of the launcher's dynamic symbol table: exported, they would stand in
//! for the real unwinder in any library loaded into the launcher.
//!
//! What a backtrace shows instead: nothing (`_Unwind_Backtrace` says the
//! stack ends at once), and the process still aborts as `panic = "abort"`
//! has it. Only on glibc Linux (x86_64 and arm64, whose unwinders have
//! these entry points), only with `panic = "abort"` and never in the unit
//! tests, whose harness unwinds (main.rs).

use std::ffi::c_void;

/// `_URC_END_OF_STACK`: the walk is over.
const END_OF_STACK: i32 = 5;

/// A backtrace: over before its first frame, without calling `_trace`.
#[no_mangle]
pub extern "C" fn _Unwind_Backtrace(_trace: *const c_void, _arg: *mut c_void) -> i32 {
    END_OF_STACK
}

/// Continues an unwinding that never starts: a landing pad reached
/// without one is a broken invariant, so the process ends as a panic
/// would.
#[no_mangle]
pub extern "C" fn _Unwind_Resume(_exception: *mut c_void) -> ! {
    std::process::abort()
}

/// The frame queries below are made only by the personality routine and
/// the backtrace printer for a frame an unwinder handed them, and no
/// frame is ever handed out: each answers as for no frame.
#[no_mangle]
pub extern "C" fn _Unwind_GetIP(_context: *mut c_void) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn _Unwind_GetIPInfo(_context: *mut c_void, before: *mut i32) -> usize {
    if !before.is_null() {
        // SAFETY: the caller passes a pointer to an int it owns, checked
        // non-null; the unwinder's contract is to write it.
        unsafe { *before = 0 };
    }
    0
}

#[no_mangle]
pub extern "C" fn _Unwind_GetLanguageSpecificData(_context: *mut c_void) -> *mut c_void {
    std::ptr::null_mut()
}

#[no_mangle]
pub extern "C" fn _Unwind_GetRegionStart(_context: *mut c_void) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn _Unwind_GetDataRelBase(_context: *mut c_void) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn _Unwind_GetTextRelBase(_context: *mut c_void) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn _Unwind_SetGR(_context: *mut c_void, _reg: i32, _value: usize) {}

#[no_mangle]
pub extern "C" fn _Unwind_SetIP(_context: *mut c_void, _value: usize) {}
