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
//! And on x86_64 Linux, `-nostartfiles`: the C runtime's `crti.o`,
//! `crtbeginS.o` and `crtendS.o` bring `_init`/`_fini`, an `.init_array`
//! and a `.fini_array` entry of their own (`frame_dummy`,
//! `__do_global_dtors_aux`) and four weak undefined symbols
//! (`__cxa_finalize`, `__gmon_start__`, the two `_ITM_*CloneTable`), each
//! looked up in every loaded object by the loader at every start: about
//! 3,800 instructions and 2 page faults of each process, for a library
//! that has no C++ constructors, no profiling and is never unloaded. The
//! library's own constructor and destructor are `.init_array` and
//! `.fini_array` entries (`init.rs`), which the loader runs without them.
//! The one symbol they defined that the library uses, `__dso_handle` (the
//! handle its fork handlers are registered under), lld defines itself
//! (rustc links x86_64 Linux with lld); GNU ld, used for other targets,
//! does not, so they keep the start files.
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
        println!("cargo:rustc-link-arg-cdylib=-nostartfiles");
    }
}
