//! The kind of Mac, and its boot-args.

/// The kind of Mac: what its processes can be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Host {
    /// arm64e (Apple's own programs), arm64, and x86_64 under Rosetta.
    #[default]
    AppleSilicon,
    Intel,
}

impl Host {
    /// This Mac. `hw.optional.arm64` is 1 on Apple Silicon, also inside a
    /// process translated by Rosetta.
    #[cfg(target_os = "macos")]
    pub fn this() -> Host {
        let mut v = [0u8; std::mem::size_of::<libc::c_int>()];
        let read = sysctl(c"hw.optional.arm64", &mut v).is_some();
        if read && libc::c_int::from_ne_bytes(v) == 1 {
            Host::AppleSilicon
        } else {
            Host::Intel
        }
    }
}

/// Does a boot-args line hold `-arm64e_preview_abi`, the flag that lets
/// the kernel run arm64e programs that are not part of macOS (xnu-11417
/// bsd/kern/kern_exec.c, `bootarg_arm64e_preview_abi`)?
pub fn arm64e_preview_abi(bootargs: &str) -> bool {
    bootargs
        .split_whitespace()
        .any(|a| a == "-arm64e_preview_abi")
}

/// `sysctlbyname(name)` read into `buf`: the length the kernel wrote,
/// none if the call failed.
#[cfg(target_os = "macos")]
pub fn sysctl(name: &std::ffi::CStr, buf: &mut [u8]) -> Option<usize> {
    let mut len = buf.len();
    // SAFETY: a NUL-terminated name and an out-buffer of `len` bytes.
    let r = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    (r == 0).then_some(len)
}

/// This Mac's boot-args (`kern.bootargs`, readable by anyone: xnu
/// bsd/kern/kern_sysctl.c, `sysctl_sysctl_bootargs`), "" if unreadable.
#[cfg(target_os = "macos")]
pub fn bootargs() -> String {
    let mut buf = [0u8; 1024];
    let Some(len) = sysctl(c"kern.bootargs", &mut buf) else {
        return String::new();
    };
    let s = &buf[..len.min(buf.len())];
    let s = s.split(|&c| c == 0).next().unwrap_or(b"");
    String::from_utf8_lossy(s).into_owned()
}
