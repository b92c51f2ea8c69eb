//! Which libmunmapq the launcher preloads.

mod embedded;

use crate::platform::{self, LIB_NAME};
use std::path::{Path, PathBuf};

/// `--lib`, else `$MUNMAPQ_LIB`, else next to this executable or in
/// `../lib` beside it (a build tree, a package), else the library built into
/// this executable (what `cargo install` gives), written to a private cache
/// directory. The answer is absolute: the command may chdir.
pub fn find_library(explicit: Option<PathBuf>) -> Result<PathBuf, String> {
    let from_env = || {
        std::env::var_os("MUNMAPQ_LIB")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(p) = explicit.or_else(from_env) {
        check_explicit(&p)?;
        return p
            .canonicalize()
            .map_err(|e| format!("{}: {e}", p.display()));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let beside = [dir.join(LIB_NAME), dir.join("../lib").join(LIB_NAME)];
    if let Some(p) = beside.iter().find(|p| p.is_file()) {
        // macOS: `cargo build` leaves a library of the build's one
        // architecture beside munmapq; the embedded one is universal
        // (build.rs), so it serves more programs.
        if cfg!(target_os = "macos") {
            if let Some(Ok(embedded)) = embedded::library() {
                let (b, e) = (
                    platform::library_archs(p),
                    platform::library_archs(&embedded),
                );
                if b.len() < e.len() && b.iter().all(|a| e.contains(a)) {
                    return Ok(embedded);
                }
            }
        }
        return p
            .canonicalize()
            .map_err(|e| format!("{}: {e}", p.display()));
    }
    match embedded::library() {
        Some(r) => r,
        None => Err(format!(
            "{LIB_NAME} not found next to munmapq ({}) and none is built in; build it (cargo build --release) or give --lib PATH",
            beside[0].display()
        )),
    }
}

/// A library named by `--lib` or `$MUNMAPQ_LIB` must be a readable file
/// that starts as a shared library does (ELF, or Mach-O on macOS): the
/// dynamic linker would otherwise skip it with a message of its own, and
/// the command would run without munmapq.
fn check_explicit(p: &Path) -> Result<(), String> {
    let what = format!("library {}", p.display());
    let meta = std::fs::metadata(p).map_err(|e| format!("{what}: {e}"))?;
    if meta.is_dir() {
        return Err(format!(
            "{what} is a directory; give the path of {LIB_NAME} itself (munmapq --print-lib prints the default)"
        ));
    }
    let head = crate::macho::head(p).map_err(|e| format!("{what}: {e}"))?;
    if !head.starts_with(b"\x7fELF") && crate::macho::archs(&head).is_none() {
        return Err(format!(
            "{what} is not a shared library (neither ELF nor Mach-O); give the path of {LIB_NAME}"
        ));
    }
    Ok(())
}
