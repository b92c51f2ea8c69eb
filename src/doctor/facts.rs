//! What the doctor knows of a program (`Facts`) and says of it
//! (`Verdict`), and the facts the file itself gives (set-id bits, script,
//! ELF or Mach-O header).

use crate::macho::{self, Arch, Host};
use crate::program::shebang;
use std::path::{Path, PathBuf};

/// What decides whether a preloaded library reaches a program.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Facts {
    pub path: PathBuf,
    pub setuid: bool,
    pub setgid: bool,
    /// Linux: why running it would be in secure mode (`secure.rs`).
    pub secure: Option<String>,
    /// Linux: an ELF file.
    pub elf: bool,
    /// Linux: the program interpreter (PT_INTERP), none for static binaries.
    pub interpreter: Option<String>,
    /// Linux: the interpreter is not there, so the exec fails (ENOENT).
    pub interpreter_missing: bool,
    /// Linux: the dynamic linker itself, run as a program (it takes
    /// LD_PRELOAD for the program it is given).
    pub dynamic_linker: bool,
    /// Linux: a program for another machine or word size (run by an
    /// emulator), by name.
    pub foreign: Option<String>,
    /// A script: its `#!` interpreter.
    pub shebang: Option<String>,
    /// Linux: built with AddressSanitizer, and how.
    pub asan: Option<crate::program::elf::Asan>,
    /// `ASAN_OPTIONS` turns ASan's link order check off.
    pub asan_check_off: bool,
    /// macOS: on a SIP-protected path (/usr/bin, /bin, /System, ...), once
    /// symlinks are resolved.
    pub sip_protected: bool,
    /// macOS: the slice that runs has a `__RESTRICT,__restrict` section.
    pub restrict_section: bool,
    /// macOS: signed with the restrict flag (codesign flag 0x800).
    pub cs_restrict: bool,
    /// macOS: a platform binary, part of macOS (codesign prints its
    /// "Platform identifier").
    pub platform_binary: bool,
    /// macOS: this Mac was booted with `-arm64e_preview_abi`.
    pub arm64e_preview_abi: bool,
    /// macOS: signed with the hardened runtime (codesign flag 0x10000).
    pub hardened_runtime: bool,
    /// macOS: entitlement com.apple.security.cs.allow-dyld-environment-variables.
    pub allows_dyld_env: bool,
    /// macOS: entitlement com.apple.security.cs.disable-library-validation.
    pub disables_library_validation: bool,
    /// macOS: library validation requested (codesign flag 0x2000).
    pub library_validation: bool,
    /// macOS: a Mach-O file, and its architectures (from its header).
    pub mach_o: bool,
    pub archs: Vec<Arch>,
    /// macOS: the library's architectures, and the kind of Mac.
    pub lib_archs: Vec<Arch>,
    pub host: Host,
}

#[derive(Debug, PartialEq)]
pub enum Verdict {
    Loads,
    /// Why not, and what to do instead.
    WontLoad(String, String),
}

/// What the file itself says: set-id bits, script or ELF, interpreter,
/// AddressSanitizer.
pub fn file_facts(path: &Path) -> std::io::Result<Facts> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)?;
    let mode = meta.permissions().mode();
    let data = macho::head(path)?;
    let mut f = Facts {
        path: path.to_path_buf(),
        setuid: mode & 0o4000 != 0,
        setgid: mode & 0o2000 != 0,
        #[cfg(target_os = "linux")]
        secure: super::secure::why(path, &meta),
        ..Facts::default()
    };
    if let Some(interp) = shebang(&data) {
        f.shebang = Some(interp);
    } else if let Some(archs) = macho::archs(&data) {
        f.mach_o = true;
        f.archs = archs;
    } else if data.starts_with(b"\x7fELF") {
        f.elf = true;
        f.interpreter = crate::program::elf::interpreter(path);
        f.interpreter_missing = f
            .interpreter
            .as_deref()
            .is_some_and(|i| !crate::program::elf::linker_exists(i));
        let header = crate::program::elf::header(path);
        f.foreign = header
            .as_ref()
            .filter(|h| h.foreign())
            .map(|h| h.machine_name());
        // A shared object without an interpreter named as glibc names its
        // dynamic linker (a static-pie program is a shared object too).
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        f.dynamic_linker = f.interpreter.is_none()
            && header.is_some_and(|h| h.shared_object())
            && (name.starts_with("ld-linux") || name.starts_with("ld64.so"));
        (f.asan, f.asan_check_off) = crate::program::asan::facts(path);
    }
    Ok(f)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn reads_elf_interpreters() {
        let f = file_facts(Path::new("/bin/sh")).unwrap();
        assert!(f.elf || f.shebang.is_some());
        let me = file_facts(&std::env::current_exe().unwrap()).unwrap();
        assert!(me.interpreter.unwrap().contains("ld-"));
    }
}
