//! Linux: thread-locals of a `no_std` library. Stable Rust has no
//! `#[thread_local]` outside std, so each is a `.tbss` object declared in
//! assembly ([`tls_object!`]) and reached with the initial-exec TLS model
//! ([`tls_address!`]): the thread pointer plus an offset the dynamic linker
//! fixes at load time. No lazy registration, no allocation, no call: glibc
//! places the static TLS of a library loaded at start-up, as `LD_PRELOAD`
//! ones are, in every thread's block (the library is marked
//! `DF_STATIC_TLS`). A library `dlopen`ed later would need surplus static
//! TLS: munmapq is not meant to be `dlopen`ed.

/// Declares a zero-initialised, 8-aligned `.tbss` object of `$size` bytes
/// named `$sym`: global (every codegen unit of this crate refers to it)
/// but hidden (not exported from the library).
macro_rules! tls_object {
    ($sym:literal, $size:literal) => {
        core::arch::global_asm!(
            ".pushsection .tbss,\"awT\",@nobits",
            ".p2align 3",
            concat!(".globl ", $sym),
            concat!(".hidden ", $sym),
            concat!(".type ", $sym, ", @tls_object"),
            concat!(".size ", $sym, ", ", $size),
            concat!($sym, ":"),
            concat!(".zero ", $size),
            ".popsection",
        );
    };
}
pub(crate) use tls_object;

/// The calling thread's address of the `tls_object!` named `$sym`.
macro_rules! tls_address {
    ($sym:literal) => {{
        let at: usize;
        // SAFETY: reads the thread pointer and the GOT slot holding the
        // object's offset from it (initial-exec model); no memory is written.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            core::arch::asm!(
                concat!("mov {at}, qword ptr [rip + ", $sym, "@GOTTPOFF]"),
                "add {at}, qword ptr fs:[0]",
                at = out(reg) at,
                options(nostack, readonly, preserves_flags),
            );
        }
        // SAFETY: as above, for aarch64.
        #[cfg(target_arch = "aarch64")]
        unsafe {
            core::arch::asm!(
                "mrs {at}, tpidr_el0",
                concat!("adrp {off}, :gottprel:", $sym),
                concat!("ldr {off}, [{off}, #:gottprel_lo12:", $sym, "]"),
                "add {at}, {at}, {off}",
                at = out(reg) at,
                off = out(reg) _,
                options(nostack, readonly, preserves_flags),
            );
        }
        at
    }};
}
pub(crate) use tls_address;
