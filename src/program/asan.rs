//! Programs built with AddressSanitizer. gcc links them against the
//! shared ASan runtime, which checks at start that it comes first in the
//! library list and otherwise aborts ("ASan runtime does not come first in
//! initial library list"): any LD_PRELOAD stops them. The check is
//! `verify_asan_link_order` (on by default); off, the program runs with
//! libmunmapq ahead of ASan: libmunmapq hands the calls it does not answer
//! to ASan's interceptors (dlsym RTLD_NEXT), and ASan does not see the
//! mmaps libmunmapq answers from its queue. A static runtime (clang's
//! default, gcc's `-static-libasan`) has no such check.

use crate::program::elf::{self, Asan};
use crate::quote::quote_path;
use std::path::Path;

/// Whether `ASAN_OPTIONS` turns the link order check off
/// (`verify_asan_link_order=0`; options are separated by `:`, `,` or
/// blanks, the last one wins).
pub fn order_check_off(options: Option<&str>) -> bool {
    options
        .unwrap_or("")
        .split([':', ',', ' ', '\t', '\n'])
        .filter_map(|o| o.strip_prefix("verify_asan_link_order="))
        .next_back()
        .is_some_and(|v| matches!(v, "0" | "false" | "no"))
}

fn env_check_off() -> bool {
    order_check_off(std::env::var("ASAN_OPTIONS").ok().as_deref())
}

/// Why the shared runtime stops the program, for `lib` (`libasan.so.8`).
pub fn why(lib: &str) -> String {
    format!(
        "it is built with AddressSanitizer ({lib}), whose runtime aborts the program when another \
         library is preloaded before it (\"ASan runtime does not come first\")"
    )
}

/// What to do instead.
pub const INSTEAD: &str = "run it with ASAN_OPTIONS=verify_asan_link_order=0 in the environment \
     (then ASan does not see the mmaps libmunmapq answers from its queue; its other checks stay), \
     or without munmapq";

/// The doctor's verdict on ASan: Err((why, instead)) when the program would
/// abort, Ok(Some(note)) when it runs with a caveat, Ok(None) otherwise.
pub fn judge(asan: Option<&Asan>, check_off: bool) -> Result<Option<String>, (String, String)> {
    match asan {
        None => Ok(None),
        Some(Asan::Shared(lib)) if !check_off => Err((why(lib), INSTEAD.into())),
        Some(Asan::Shared(lib)) => Ok(Some(format!(
            "it is built with AddressSanitizer ({lib}); ASAN_OPTIONS has verify_asan_link_order=0, \
             so it runs with the library (ASan does not see the mmaps libmunmapq answers from its queue)"
        ))),
        Some(Asan::Static) => Ok(Some(
            "it carries a static AddressSanitizer runtime, which has no link order check: its \
             interceptors pass mmap and munmap on to libmunmapq"
                .into(),
        )),
    }
}

/// Facts for the doctor: the program's ASan runtime and whether the
/// environment turns the check off.
pub fn facts(program: &Path) -> (Option<Asan>, bool) {
    (elf::asan(program), env_check_off())
}

/// The launcher's one line before running `program`, when it needs the
/// shared ASan runtime and the check is on (it reads the dynamic section
/// only: cheap enough for every run).
pub fn launcher_warning(program: &Path) -> Option<String> {
    if env_check_off() {
        return None;
    }
    let lib = elf::shared_asan(program)?;
    Some(format!(
        "warning: {}: {}; {} (see munmapq doctor {})",
        quote_path(program),
        why(&lib),
        INSTEAD,
        quote_path(program)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_verdicts() {
        assert!(order_check_off(Some("verify_asan_link_order=0")));
        assert!(order_check_off(Some(
            "detect_leaks=0:verify_asan_link_order=false"
        )));
        assert!(!order_check_off(Some(
            "verify_asan_link_order=0,verify_asan_link_order=1"
        )));
        assert!(!order_check_off(None));
        let shared = Asan::Shared("libasan.so.8".into());
        let (why, instead) = judge(Some(&shared), false).unwrap_err();
        assert!(why.contains("libasan.so.8") && instead.contains("verify_asan_link_order=0"));
        assert!(judge(Some(&shared), true).unwrap().is_some());
        assert!(judge(Some(&Asan::Static), false).unwrap().is_some());
        assert_eq!(judge(None, false), Ok(None));
    }
}
