//! The build script of the cdylib crate that links libmunmapq
//! (`interpose/cdylib` in the workspace, and the one the launcher's
//! `build.rs` writes): on Apple targets, link with `-dead_strip_dylibs`;
//! on x86_64 Linux, with `-z separate-loadable-segments`.
//!
//! Every page of the library a process touches at load is a page fault:
//! the loader writes the relocated pointers of the RELRO segment (3 KiB
//! here), which otherwise starts in the middle of a page and spans two.
//! Each segment starting on a page of its own (lld, rustc's linker for
//! x86_64 Linux; GNU ld, which has no such option, says it ignores it)
//! costs a few KiB of padding in the file and saves a fault in every
//! process.
//!
//! The libc crate declares `iconv_open`, `iconv` and `iconv_close` in a
//! block with `#[link(name = "iconv")]` (its `src/unix/bsd/apple/mod.rs`;
//! only `rustc-dep-of-std`, a feature for the standard library's own build,
//! leaves it out), so rustc passes `-liconv` to every Apple link that has
//! the libc crate, used or not; the linker then records
//! `/usr/lib/libiconv.2.dylib` in an LC_LOAD_DYLIB, and dyld loads it (and
//! its `libcharset.1.dylib`) into every program libmunmapq is inserted into.
//! `-dead_strip_dylibs` makes the linker drop a dylib none of whose symbols
//! is used (ld64(1), dyld's `doc/man/man1/ld.1`), which leaves libSystem
//! alone; scripts/inspect_macho.py checks the load commands.
//!
//! And `-install_name @rpath/libmunmapq.dylib`: rustc gives the linker the
//! output's absolute path as the dylib's install name (its `LC_ID_DYLIB`),
//! so every copy would carry the build machine's directory (a home
//! directory). Nothing links against this library (dyld loads it by the
//! path in `DYLD_INSERT_LIBRARIES`), so the name only has to say nothing
//! of where it was built; scripts/inspect_macho.py checks it.

fn main() {
    let cfg = |name: &str| std::env::var(format!("CARGO_CFG_TARGET_{name}")).unwrap_or_default();
    if cfg("VENDOR") == "apple" {
        println!("cargo:rustc-link-arg-cdylib=-Wl,-dead_strip_dylibs");
        println!("cargo:rustc-link-arg-cdylib=-Wl,-install_name,@rpath/libmunmapq.dylib");
    }
    if cfg("OS") == "linux" && cfg("ARCH") == "x86_64" {
        println!("cargo:rustc-link-arg-cdylib=-Wl,-z,separate-loadable-segments");
    }
}
