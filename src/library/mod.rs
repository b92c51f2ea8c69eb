//! Which libmunmapq the launcher preloads.

mod embedded;
#[cfg(target_os = "linux")]
mod search;

use crate::out::why;
use crate::platform::{self, LIB_NAME, PRELOAD_VAR};
use crate::quote::quote_path;
use std::path::{Path, PathBuf};

/// Why there is no library to preload.
#[derive(Debug)]
pub struct LibError {
    pub msg: String,
    /// Only because no cache directory could take the built-in library:
    /// then the command runs without it, after one line saying why.
    pub no_cache: bool,
}

impl From<String> for LibError {
    fn from(msg: String) -> LibError {
        LibError {
            msg,
            no_cache: false,
        }
    }
}

impl From<LibError> for String {
    fn from(e: LibError) -> String {
        e.msg
    }
}

/// `--lib`, else `$MUNMAPQ_LIB`, else next to this executable or in
/// `../lib` beside it (a build tree, a package), else the library built into
/// this executable (what `cargo install` gives), written to a private cache
/// directory. The answer is absolute: the command may chdir.
pub fn find_library(explicit: Option<PathBuf>) -> Result<PathBuf, LibError> {
    let from_env = || {
        std::env::var_os("MUNMAPQ_LIB")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let named = match explicit {
        Some(p) => Some((p, false)),
        None => from_env().map(|p| (p, true)),
    };
    if let Some((p, env)) = named {
        // Said as the caller gave it: the option, or the variable (which
        // may come from a profile they forgot), and how to do without.
        let (what, fix) = if env {
            (
                format!("MUNMAPQ_LIB={} (from the environment)", quote_path(&p)),
                "; unset MUNMAPQ_LIB to use the library munmapq finds itself (munmapq --print-lib \
                 prints it), or set it to a libmunmapq"
                    .to_string(),
            )
        } else {
            (
                format!("--lib {}", quote_path(&p)),
                "; leave --lib out to use the library munmapq finds itself (munmapq --print-lib \
                 prints it)"
                    .to_string(),
            )
        };
        let real = check_explicit(&p)
            .and_then(|()| p.canonicalize().map_err(|e| why(&e)))
            .and_then(|real| unsplit(real, &p));
        return real.map_err(|e| LibError::from(format!("{what}: {e}{fix}")));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let beside = [dir.join(LIB_NAME), dir.join("../lib").join(LIB_NAME)];
    // One the preload list would split (munmapq installed under a
    // directory with a space) gives way to the embedded one, whose cache
    // directory is chosen so that it is not split.
    let splits = |p: &Path| {
        let real = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        platform::PRELOAD_LIST.would_split(&real)
    };
    if let Some(p) = beside.iter().find(|p| p.is_file() && !splits(p)) {
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
        return Ok(p
            .canonicalize()
            .map_err(|e| format!("{}: {e}", quote_path(p)))?);
    }
    match embedded::library() {
        Some(r) => r.map_err(|msg| LibError {
            msg,
            no_cache: true,
        }),
        None => Err(LibError::from(format!(
            "{LIB_NAME} not found next to munmapq ({}) and none is built in; build it (cargo build --release) or give --lib PATH",
            quote_path(&beside[0])
        ))),
    }
}

/// `real`, the library named `given`, unless the preload list would cut
/// its path into pieces: the dynamic linker has no quoting, and would try
/// to load each piece instead.
fn unsplit(real: PathBuf, given: &Path) -> Result<PathBuf, String> {
    let list = platform::PRELOAD_LIST;
    if !list.would_split(&real) {
        return Ok(real);
    }
    let resolved = if real != given {
        format!(" (it resolves to {})", quote_path(&real))
    } else {
        String::new()
    };
    Err(format!(
        "accepts a path without {}{resolved} ({PRELOAD_VAR} is split at them, with no quoting: \
         the library would never load)",
        list.separators()
    ))
}

/// A library named by `--lib` or `$MUNMAPQ_LIB` must be a readable file
/// that starts as a shared library does (ELF, or Mach-O on macOS): the
/// dynamic linker would otherwise skip it with a message of its own, and
/// the command would run without munmapq.
fn check_explicit(p: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(p).map_err(|e| why(&e))?;
    if meta.is_dir() {
        return Err(format!("is a directory, not the path of {LIB_NAME} itself"));
    }
    let head = crate::macho::head(p).map_err(|e| why(&e))?;
    if !head.starts_with(b"\x7fELF") && crate::macho::archs(&head).is_none() {
        return Err("is not a shared library (neither ELF nor Mach-O)".into());
    }
    if head.starts_with(b"\x7fELF") {
        if let Some(interp) = crate::program::elf::interpreter(p) {
            return Err(format!(
                "is a program (it names the dynamic linker {interp}), not a shared library: the dynamic linker would skip it"
            ));
        }
        if let Some(why) = elf_mismatch(&head) {
            return Err(format!("is {why}: the dynamic linker would skip it"));
        }
    }
    Ok(())
}

/// Why ld.so would skip this ELF file as a preloaded library for the
/// launcher's own kind of program (the programs it runs are judged by
/// doctor): not a shared object, another class, another byte order or
/// another machine.
fn elf_mismatch(head: &[u8]) -> Option<String> {
    if head.len() < 20 {
        return Some("a truncated ELF file".into());
    }
    let class = if cfg!(target_pointer_width = "64") {
        2
    } else {
        1
    };
    let data = if cfg!(target_endian = "little") { 1 } else { 2 };
    if head[4] != class {
        return Some(format!(
            "a {}-bit ELF file",
            if head[4] == 1 { 32 } else { 64 }
        ));
    }
    if head[5] != data {
        return Some("an ELF file of the other byte order".into());
    }
    let half = |i: usize| {
        let b = [head[i], head[i + 1]];
        if data == 1 {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }
    };
    const ET_DYN: u16 = 3;
    if half(16) != ET_DYN {
        return Some("not a shared object (ELF type is not ET_DYN)".into());
    }
    let me = std::env::current_exe().ok()?;
    let mine = crate::macho::head(&me).ok()?;
    (mine.len() >= 20 && mine[18..20] != head[18..20])
        .then(|| format!("for another machine (ELF e_machine {})", half(18)))
}

/// Whether the preloaded entry `entry` is a libmunmapq, of any version or
/// build (another install's, an older cache's, a test build under another
/// name): two copies in one list would both hook every call, the second
/// under the first. On Linux a bare name is looked up, and `$LIB` and
/// `$PLATFORM` expanded, as the dynamic linker does (`search.rs`); an
/// entry with `$ORIGIN` is left as it is.
pub fn is_a_munmapq(entry: &Path) -> bool {
    #[cfg(target_os = "linux")]
    let files = search::files(entry.as_os_str());
    #[cfg(not(target_os = "linux"))]
    let files = {
        use std::os::unix::ffi::OsStrExt;
        let raw = entry.as_os_str().as_bytes();
        let plain = raw.contains(&b'/') && !raw.contains(&b'$');
        plain
            .then(|| entry.to_path_buf())
            .into_iter()
            .collect::<Vec<_>>()
    };
    files.iter().any(|f| is_a_munmapq_file(f))
}

/// Whether the file `path` is a libmunmapq: it exports the calls only it
/// replaces together (`closefrom`, `close_range`, `mseal` beside `mmap`
/// and `munmap`) and names the variables it reads; the file is read only
/// once its exports say so, and only a regular, non-empty file of at most
/// 32 MiB (a `/proc` file says it is empty).
fn is_a_munmapq_file(path: &Path) -> bool {
    const MARK: &[u8] = b"MUNMAPQ_MAX_ENTRIES";
    const EXPORTS: [&[u8]; 5] = [b"mmap", b"munmap", b"closefrom", b"close_range", b"mseal"];
    const MOST: u64 = 32 << 20;
    let plain_file =
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() > 0 && m.len() <= MOST);
    plain_file
        && crate::program::elf::exports_all(path, &EXPORTS)
        && std::fs::read(path).is_ok_and(|bytes| bytes.windows(MARK.len()).any(|w| w == MARK))
}
