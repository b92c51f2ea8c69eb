//! Everything the launcher does differently per platform, in one place:
//! the library's file name, the variable that preloads it, how that
//! variable's list is split and joined, and what would make the dynamic
//! linker kill a program rather than skip the library. (The file name and
//! the variable are `munmapq-check`'s, which the tests share.)

use crate::macho;
use std::ffi::OsString;
use std::path::Path;

pub use munmapq_check::platform::{LIB_NAME, PRELOAD_VAR};

/// How a preload list is written and read.
#[allow(dead_code)] // a platform uses one variant; the tests both
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreloadList {
    /// dyld: `:` only (dyld-1378 dyld/DyldProcessConfig.cpp,
    /// `PathOverrides::forEachInColonList`, used by `forEachInsertedDylib`);
    /// a path may hold spaces ("Application Support").
    Colons,
    /// glibc's ld.so: spaces and colons both separate (elf/rtld.c,
    /// `handle_preload_list`, which cuts at " :").
    SpacesAndColons,
}

#[cfg(target_os = "macos")]
pub const PRELOAD_LIST: PreloadList = PreloadList::Colons;
#[cfg(not(target_os = "macos"))]
pub const PRELOAD_LIST: PreloadList = PreloadList::SpacesAndColons;

impl PreloadList {
    /// The separator written between entries.
    pub fn separator(self) -> char {
        match self {
            PreloadList::Colons => ':',
            PreloadList::SpacesAndColons => ' ',
        }
    }

    /// The entries of a list, as the dynamic linker reads them.
    pub fn split(self, list: &str) -> Vec<&str> {
        let parts: Vec<&str> = match self {
            PreloadList::Colons => list.split(':').collect(),
            PreloadList::SpacesAndColons => list.split([':', ' ']).collect(),
        };
        parts.into_iter().filter(|p| !p.is_empty()).collect()
    }

    /// `lib` first, then what was already preloaded (without a second copy).
    pub fn prepend(self, lib: &Path, existing: Option<OsString>) -> OsString {
        let mut v = lib.as_os_str().to_owned();
        if let Some(old) = existing.filter(|o| !o.is_empty()) {
            let old = old.to_string_lossy().into_owned();
            for part in self.split(&old).into_iter().filter(|p| Path::new(p) != lib) {
                v.push(self.separator().to_string());
                v.push(part);
            }
        }
        v
    }
}

/// The library's Mach-O architectures; empty when unreadable or not Mach-O.
pub fn library_archs(lib: &Path) -> Vec<macho::Arch> {
    macho::head(lib)
        .ok()
        .and_then(|h| macho::archs(&h))
        .unwrap_or_default()
}

/// macOS: why the launcher runs `program` without `lib`, or None to preload
/// it: dyld would ignore DYLD_INSERT_LIBRARIES for the program (SIP,
/// setuid/setgid, restricted, the hardened runtime without the
/// entitlement: it also drops the variable for the program's children, so
/// running without loses nothing) or kill it for the library (library
/// validation, an architecture the library lacks), or the kernel does not
/// run the program anyway (`doctor::run_without`, the doctor's rules). A
/// script is judged by its `#!` interpreter. Linux: None (ld.so skips a
/// library of the wrong class with a warning).
#[cfg_attr(not(target_os = "macos"), allow(unused_variables))]
pub fn would_kill(program: &Path, lib: &Path) -> Option<String> {
    #[cfg(target_os = "macos")]
    {
        let preview = macho::arm64e_preview_abi(&macho::bootargs());
        run_without_why(
            program,
            &library_archs(lib),
            macho::Host::this(),
            preview,
            &crate::doctor::signing_facts,
        )
    }
    #[cfg(not(target_os = "macos"))]
    None
}

/// The launcher's decision on macOS, on facts read from the files: follows
/// a script's `#!` interpreters, reads the program's Mach-O header and the
/// running slice's load commands, and only then, if those leave the answer
/// open, asks `sign` for the code-signing facts (`codesign` on a Mac, a
/// canned answer in tests). Not cfg-gated: Linux tests it on fake files.
#[cfg_attr(not(target_os = "macos"), allow(dead_code))] // macOS and tests
pub fn run_without_why(
    program: &Path,
    lib_archs: &[macho::Arch],
    host: macho::Host,
    arm64e_preview_abi: bool,
    sign: &dyn Fn(&mut crate::doctor::Facts),
) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut program = program.to_path_buf();
    for _ in 0..4 {
        let head = macho::head(&program).ok()?;
        let Some(archs) = macho::archs(&head) else {
            let interp = crate::program::shebang(&head)?;
            if crate::program::sip_protected_file(Path::new(&interp)) {
                return Some(format!("its #! interpreter {interp} is covered by System Integrity Protection: dyld drops every DYLD_* variable for it and for everything it starts"));
            }
            program = interp.into();
            continue;
        };
        let mode = std::fs::metadata(&program).ok()?.permissions().mode();
        let mut f = crate::doctor::Facts {
            path: program.clone(),
            setuid: mode & 0o4000 != 0,
            setgid: mode & 0o2000 != 0,
            mach_o: true,
            archs,
            lib_archs: lib_archs.to_vec(),
            host,
            arm64e_preview_abi,
            ..Default::default()
        };
        crate::doctor::mach_o_facts(&mut f);
        // dyld ignores the variable whatever the signature says (and
        // Apple's arm64e programs, which are SIP-protected, would otherwise
        // look refused by the kernel: only the signature says they are
        // platform binaries).
        if f.sip_protected || f.setuid || f.setgid || f.restrict_section {
            return crate::doctor::dyld_refusal(&f).map(|(why, _)| why);
        }
        sign(&mut f);
        return crate::doctor::run_without(&f);
    }
    None
}

/// macOS: `munmapq preload-env` preloads the library into everything the shell
/// starts, so it must serve every architecture a process of this Mac can
/// be. Linux: always fine.
pub fn shell_wide_ok(lib: &Path) -> Result<(), String> {
    #[cfg(target_os = "macos")]
    {
        let archs = library_archs(lib);
        let missing = macho::unserved(&archs, macho::Host::this());
        if !missing.is_empty() {
            return Err(shell_wide_refusal(lib, &archs, &missing));
        }
    }
    let _ = lib;
    Ok(())
}

#[cfg_attr(not(target_os = "macos"), allow(dead_code))] // macOS and tests
pub fn shell_wide_refusal(lib: &Path, archs: &[macho::Arch], missing: &[macho::Arch]) -> String {
    format!(
        "preload-env: {} has {}, and dyld kills every {} process it is inserted into; use `munmapq shell-init` (it checks each program) or `munmapq COMMAND`",
        lib.display(),
        macho::names(archs),
        macho::names(missing)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dyld_splits_on_colons_only_ld_so_on_spaces_too() {
        let lib = Path::new("/c/libmunmapq.dylib");
        let existing = "/Users/me/Library/Application Support/x.dylib:/opt/y.dylib";
        let mac = PreloadList::Colons.prepend(lib, Some(existing.into()));
        assert_eq!(
            mac,
            "/c/libmunmapq.dylib:/Users/me/Library/Application Support/x.dylib:/opt/y.dylib"
        );
        assert_eq!(PreloadList::Colons.split(&mac.to_string_lossy()).len(), 3);
        // No second copy, empty entries dropped.
        let again =
            PreloadList::Colons.prepend(lib, Some("/c/libmunmapq.dylib::/opt/y.dylib".into()));
        assert_eq!(again, "/c/libmunmapq.dylib:/opt/y.dylib");
        // Linux keeps splitting on both, and joins with spaces.
        let lib = Path::new("/c/libmunmapq.so");
        let linux =
            PreloadList::SpacesAndColons.prepend(lib, Some("/a.so /b.so:/c/libmunmapq.so".into()));
        assert_eq!(linux, "/c/libmunmapq.so /a.so /b.so");
        assert_eq!(
            PreloadList::SpacesAndColons.prepend(lib, Some("".into())),
            "/c/libmunmapq.so"
        );
    }

    /// The launcher's decision on fake files, with canned codesign output.
    #[test]
    fn launcher_runs_without_what_dyld_refuses() {
        use crate::doctor::{parse_codesign, Facts};
        use macho::fake::{macho, universal, CPU_ARM64, CPU_ARM64E, CPU_X86_64, RESTRICT, TEXT};
        use macho::{Arch::*, Host};
        use std::cell::Cell;
        let dir = std::env::temp_dir().join(format!("munmapq-launch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, bytes: &[u8], mode: u32| {
            use std::os::unix::fs::PermissionsExt;
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        };
        let lib = [Arm64, X86_64];
        let signed = Cell::new(0);
        let decide = |p: &Path, codesign: &str| {
            let sign = |f: &mut Facts| {
                signed.set(signed.get() + 1);
                parse_codesign(codesign, f);
            };
            run_without_why(p, &lib, Host::AppleSilicon, false, &sign)
        };
        let arm = write(
            "arm",
            &macho(CPU_ARM64.0, CPU_ARM64.1, true, &[TEXT]),
            0o755,
        );
        let linker_signed = "CodeDirectory v=20400 size=1 flags=0x20002(adhoc,linker-signed) hashes=1+0 location=embedded\n";
        assert_eq!(decide(&arm, linker_signed), None);
        assert_eq!(signed.get(), 1);
        let hardened =
            "CodeDirectory v=20500 size=1 flags=0x10000(runtime) hashes=1+7 location=embedded\n";
        assert!(decide(&arm, hardened).unwrap().contains("hardened runtime"));
        let restrict =
            "CodeDirectory v=20500 size=1 flags=0x800(restrict) hashes=1+7 location=embedded\n";
        assert!(decide(&arm, restrict).unwrap().contains("restrict flag"));
        // Decided before codesign: the section, set-id bits, a SIP interpreter.
        signed.set(0);
        let restricted = write(
            "restricted",
            &macho(CPU_ARM64.0, CPU_ARM64.1, true, &[TEXT, RESTRICT]),
            0o755,
        );
        assert!(decide(&restricted, "")
            .unwrap()
            .contains("__RESTRICT,__restrict"));
        let setuid = write(
            "setuid",
            &macho(CPU_ARM64.0, CPU_ARM64.1, true, &[TEXT]),
            0o4755,
        );
        assert!(decide(&setuid, "").unwrap().contains("setuid"));
        let sh = write("sh-script", b"#!/bin/sh\nexec git \"$@\"\n", 0o755);
        assert!(decide(&sh, "").unwrap().contains("interpreter /bin/sh"));
        assert_eq!(signed.get(), 0);
        // A script is judged by its interpreter.
        let via = write(
            "via-arm",
            format!("#!{}\n", arm.display()).as_bytes(),
            0o755,
        );
        assert_eq!(decide(&via, linker_signed), None);
        let via = write(
            "via-restricted",
            format!("#!{} -x\n", restricted.display()).as_bytes(),
            0o755,
        );
        assert!(decide(&via, "").unwrap().contains("__RESTRICT"));
        // arm64 + arm64e: the arm64e slice runs (or is refused), never arm64.
        let fat = write(
            "fat",
            &universal(&[
                macho(CPU_ARM64.0, CPU_ARM64.1, true, &[TEXT]),
                macho(CPU_ARM64E.0, CPU_ARM64E.1, true, &[TEXT]),
            ]),
            0o755,
        );
        assert!(decide(&fat, linker_signed)
            .unwrap()
            .contains("-arm64e_preview_abi"));
        let apple = "CodeDirectory v=20400 size=1 flags=0x0(none) hashes=1+7 location=embedded\nPlatform identifier=15\n";
        assert!(decide(&fat, apple).unwrap().contains("runs as arm64e"));
        let preview = |f: &mut Facts| parse_codesign(linker_signed, f);
        assert!(
            run_without_why(&fat, &lib, Host::AppleSilicon, true, &preview)
                .unwrap()
                .contains("runs as arm64e")
        );
        assert_eq!(
            run_without_why(&fat, &[Arm64e, X86_64], Host::AppleSilicon, true, &preview),
            None
        );
        // x86_64 under Rosetta with a thin arm64 library; not Mach-O; missing.
        let x86 = write(
            "x86",
            &macho(CPU_X86_64.0, CPU_X86_64.1, true, &[TEXT]),
            0o755,
        );
        assert!(
            run_without_why(&x86, &[Arm64], Host::AppleSilicon, false, &preview)
                .unwrap()
                .contains("runs as x86_64")
        );
        let data = write("data", b"just text", 0o755);
        assert_eq!(decide(&data, ""), None);
        assert_eq!(decide(&dir.join("missing"), ""), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn env_refusal_names_what_is_missing() {
        use macho::Arch::*;
        let msg = shell_wide_refusal(Path::new("/l.dylib"), &[Arm64, X86_64], &[Arm64e]);
        assert!(
            msg.contains("arm64 + x86_64") && msg.contains("every arm64e process"),
            "{msg}"
        );
    }
}
