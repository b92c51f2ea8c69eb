//! The doctor's macOS rules: does the kernel run the program, and does
//! dyld insert the library into it? And the launcher's question on the
//! same facts (`run_without`).

use super::facts::{Facts, Verdict};
use crate::macho;
use crate::program::sip_protected_file;
use std::path::Path;

/// Said after "would load" on macOS: loading is not interposing. dyld asks
/// AMFI for the permission to read `DYLD_*` paths and for the permission
/// to interpose apart (dyld `DyldProcessConfig.cpp`
/// `ProcessConfig::Security::Security`: `allowEnvVarsPath`,
/// `allowInterposing`), and no file the doctor reads says the second;
/// the library finds out in its constructor and tells the launcher.
pub const INTERPOSING_NOTE: &str = "loading is not interposing: dyld may load the library without applying its interposing (AMFI answers that apart); `munmapq --stats COMMAND` and `munmapq selftest` say \"loaded, not interposed\" when it does so";

/// The macOS rules.
pub fn judge_macos(f: &Facts) -> Verdict {
    if let Some(sh) = &f.shebang {
        if sip_protected_file(Path::new(sh)) {
            return Verdict::WontLoad(
                format!("it is a script run by {sh}, which System Integrity Protection covers: dyld drops every DYLD_* variable for it and for everything it starts"),
                "run the program the script starts with munmapq itself (e.g. munmapq /opt/homebrew/bin/git ...)".into(),
            );
        }
        return Verdict::WontLoad(
            format!("it is a script: the library loads into its interpreter {sh}, and from there into what the script runs"),
            format!("run `munmapq doctor {sh}` and check the programs the script starts"),
        );
    }
    if !f.sip_protected && !f.mach_o {
        return Verdict::WontLoad(
            "it is neither a Mach-O program nor a #! script".into(),
            "point munmapq at the real program".into(),
        );
    }
    if let Some((why, instead)) = cannot_run(f).or_else(|| dyld_refusal(f)) {
        return Verdict::WontLoad(why, instead);
    }
    Verdict::Loads
}

/// macOS: why this Mac does not run the Mach-O program at all, with or
/// without munmapq: no slice it runs, or an arm64e slice the kernel
/// refuses (see `macho::process_arch` and `macho::kernel_refuses`).
fn cannot_run(f: &Facts) -> Option<(String, String)> {
    if !f.mach_o {
        return None;
    }
    let Some(process) = macho::process_arch(&f.archs, f.host) else {
        return Some((
            format!("it has no slice this Mac runs ({})", macho::names(&f.archs)),
            "use a build of the program for this Mac".into(),
        ));
    };
    macho::kernel_refuses(process, f.platform_binary, f.arm64e_preview_abi).then(|| {
        (
            format!(
                "the kernel picks its {} slice{}, and runs an arm64e program that is not part of macOS only on a Mac booted with -arm64e_preview_abi: it does not run here, with or without munmapq",
                process.name(),
                if f.archs.len() > 1 { format!(" (of {})", macho::names(&f.archs)) } else { String::new() },
            ),
            "use a build of the program without an arm64e slice (arm64 or x86_64)".into(),
        )
    })
}

/// macOS: why dyld will not put the library into a process of this
/// program although DYLD_INSERT_LIBRARIES names it (it ignores the
/// variable, and drops it for the program's children too, or it kills the
/// process for a library it cannot load), and what to do instead. None:
/// it loads, or the program does not run here (`cannot_run`). The launcher
/// runs a program refused so without the library.
///
/// dyld-1378 dyld/DyldProcessConfig.cpp: `Security::Security` asks AMFI
/// (`amfi_check_dyld_policy_self`) whether the `DYLD_*` path variables are
/// allowed, `PathOverrides::PathOverrides` reads DYLD_INSERT_LIBRARIES only
/// if they are, and `pruneEnvVars` deletes every `DYLD_*` variable of a
/// restricted process. AMFI's policy is not published; its inputs are:
/// the `__RESTRICT,__restrict` section (`UnsafeHeader::isRestricted`, sent
/// as `AMFI_DYLD_INPUT_PROC_HAS_RESTRICT_SEG`), and the process's
/// code-signing flags, which the kernel copies from the signature's
/// CodeDirectory (xnu bsd/kern/ubc_subr.c `cs_blob_init_validated` keeps
/// `CS_ALLOWED_MACHO` of `cd->flags`, bsd/kern/mach_loader.c
/// `load_code_signature`, and bsd/kern/kern_exec.c `exec_mach_imgact`
/// keeps CS_RESTRICT, CS_RUNTIME and CS_REQUIRE_LV). The rule without AMFI, in dyld-852 src/dyld2.cpp
/// `configureProcessRestrictions`: restricted if `issetugid()`, the
/// `__RESTRICT` section, or CS_RESTRICT (0x800, "tell dyld to treat
/// restricted", xnu osfmk/kern/cs_blobs.h) with SIP on. The hardened
/// runtime's rule is Apple's entitlement documentation
/// (com.apple.security.cs.allow-dyld-environment-variables). A library
/// that fails to load kills the process unless AMFI allows insert failures
/// (dyld/DyldRuntimeState.cpp, `loadInsertedLibraries`).
pub fn dyld_refusal(f: &Facts) -> Option<(String, String)> {
    let no = |why: &str, instead: &str| Some((why.to_string(), instead.to_string()));
    if f.sip_protected {
        return no(
            "it is protected by System Integrity Protection: dyld drops DYLD_INSERT_LIBRARIES for it (/usr/bin/git is such a shim, and /bin/sh, which git uses for subprocesses, too)",
            "use a git outside the system paths, e.g. Homebrew's (/opt/homebrew/bin/git or /usr/local/bin/git)",
        );
    }
    if f.setuid || f.setgid {
        return no(
            "it is setuid/setgid: dyld ignores DYLD_* variables for it",
            "run an ordinary copy of the program",
        );
    }
    if f.restrict_section {
        return no(
            "it has a __RESTRICT,__restrict section: dyld treats it as restricted and ignores DYLD_* variables for it and its children",
            "use a build of the program without that section",
        );
    }
    if f.cs_restrict {
        return no(
            "it is signed with the restrict flag (0x800): dyld treats it as restricted and ignores DYLD_* variables for it and its children",
            "re-sign a copy of the program without the restrict flag",
        );
    }
    if f.hardened_runtime && !f.allows_dyld_env {
        return no(
            "it uses the hardened runtime without the com.apple.security.cs.allow-dyld-environment-variables entitlement: dyld ignores DYLD_INSERT_LIBRARIES",
            "use a build without the hardened runtime (e.g. Homebrew's), or re-sign a copy with that entitlement",
        );
    }
    if (f.hardened_runtime || f.library_validation) && !f.disables_library_validation {
        return no(
            "it enforces library validation: only libraries signed by Apple or its own team may load, and dyld would kill it for munmapq's",
            "re-sign a copy with com.apple.security.cs.disable-library-validation, or use an unsigned build",
        );
    }
    if !f.mach_o {
        return None;
    }
    let process = macho::process_arch(&f.archs, f.host)?;
    if macho::kernel_refuses(process, f.platform_binary, f.arm64e_preview_abi) {
        return None;
    }
    macho::would_kill(&f.archs, &f.lib_archs, f.host).map(|why| {
        (
            format!("{why} (munmapq runs it without the library instead)"),
            "use an arm64 or x86_64 build of the program, or a library with that slice".into(),
        )
    })
}

/// macOS, the launcher's question: why run this Mach-O program without the
/// library (dyld would ignore it or kill the program for it, or the kernel
/// does not run the program anyway), or None to preload it.
pub fn run_without(f: &Facts) -> Option<String> {
    match cannot_run(f) {
        // No slice for this Mac: let exec say so, as without munmapq.
        Some(_) if macho::process_arch(&f.archs, f.host).is_none() => None,
        Some((why, _)) => Some(why),
        None => dyld_refusal(f).map(|(why, _)| why),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::facts::file_facts;
    use super::*;
    use crate::macho::Arch;

    /// A Mach-O arm64 program at `path`, a universal library.
    pub fn mac(path: &str) -> Facts {
        Facts {
            path: path.into(),
            sip_protected: crate::program::sip_protected(Path::new(path)),
            mach_o: true,
            archs: vec![Arch::Arm64],
            lib_archs: vec![Arch::Arm64, Arch::X86_64],
            ..Facts::default()
        }
    }

    #[test]
    fn macos_rules() {
        assert_eq!(judge_macos(&mac("/opt/homebrew/bin/git")), Verdict::Loads);
        assert_eq!(judge_macos(&mac("/usr/local/bin/git")), Verdict::Loads);
        for p in [
            "/usr/bin/git",
            "/bin/sh",
            "/usr/libexec/git-core/git",
            "/System/x",
        ] {
            assert!(
                matches!(judge_macos(&mac(p)), Verdict::WontLoad(w, i) if w.contains("System Integrity") && i.contains("Homebrew")),
                "{p}"
            );
        }
        let hardened = Facts {
            hardened_runtime: true,
            ..mac("/Applications/X.app/Contents/MacOS/x")
        };
        assert!(
            matches!(judge_macos(&hardened), Verdict::WontLoad(w, _) if w.contains("hardened"))
        );
        let entitled = Facts {
            allows_dyld_env: true,
            disables_library_validation: true,
            ..hardened.clone()
        };
        assert_eq!(judge_macos(&entitled), Verdict::Loads);
        let only_env = Facts {
            allows_dyld_env: true,
            ..hardened
        };
        assert!(
            matches!(judge_macos(&only_env), Verdict::WontLoad(w, _) if w.contains("library validation"))
        );
    }

    #[test]
    fn macos_arm64e() {
        // A third-party program with an arm64e slice: the kernel picks that
        // slice, then refuses it without the boot-arg (no arm64 fallback).
        for archs in [vec![Arch::Arm64e], vec![Arch::Arm64e, Arch::Arm64]] {
            let e = Facts {
                archs,
                ..mac("/opt/x")
            };
            let v = judge_macos(&e);
            assert!(
                matches!(&v, Verdict::WontLoad(w, i) if w.contains("arm64e slice") && w.contains("-arm64e_preview_abi") && i.contains("without an arm64e slice")),
                "{v:?}"
            );
            assert!(run_without(&e).unwrap().contains("with or without munmapq"));
            // With the boot-arg, or Apple's own: it runs as arm64e, and dyld
            // wants an arm64e slice of the library.
            for f in [
                Facts {
                    arm64e_preview_abi: true,
                    ..e.clone()
                },
                Facts {
                    platform_binary: true,
                    ..e.clone()
                },
            ] {
                let v = judge_macos(&f);
                assert!(
                    matches!(&v, Verdict::WontLoad(w, _) if w.contains("runs as arm64e, which loads only arm64e libraries") && w.contains("kill")),
                    "{v:?}"
                );
                assert!(run_without(&f).unwrap().contains("runs as arm64e"));
                let served = Facts {
                    lib_archs: vec![Arch::Arm64e, Arch::X86_64],
                    ..f
                };
                assert_eq!(judge_macos(&served), Verdict::Loads);
                assert_eq!(run_without(&served), None);
            }
        }
        // Another pointer-auth ABI version: it runs, keys off, and loads arm64.
        let v1 = Facts {
            archs: vec![Arch::Arm64eOther(0x8100_0002), Arch::Arm64],
            ..mac("/opt/x")
        };
        assert_eq!(judge_macos(&v1), Verdict::Loads);
    }

    #[test]
    fn macos_what_the_launcher_does() {
        let ok = mac("/opt/homebrew/bin/git");
        assert_eq!(run_without(&ok), None);
        for (f, word) in [
            (mac("/usr/bin/git"), "System Integrity"),
            (
                Facts {
                    setgid: true,
                    ..ok.clone()
                },
                "setuid/setgid",
            ),
            (
                Facts {
                    hardened_runtime: true,
                    disables_library_validation: true,
                    ..ok.clone()
                },
                "allow-dyld-environment-variables",
            ),
            (
                Facts {
                    library_validation: true,
                    ..ok.clone()
                },
                "library validation",
            ),
            (
                Facts {
                    archs: vec![Arch::X86_64],
                    lib_archs: vec![Arch::Arm64],
                    ..ok.clone()
                },
                "runs as x86_64",
            ),
        ] {
            assert!(run_without(&f).is_some_and(|w| w.contains(word)), "{word}");
        }
        // Not the launcher's business: no slice for this Mac (exec says
        // so), a file that is not Mach-O (exec fails as without munmapq).
        let ppc = Facts {
            archs: vec![Arch::Other(18, 0)],
            ..ok.clone()
        };
        assert!(matches!(judge_macos(&ppc), Verdict::WontLoad(w, _) if w.contains("no slice")));
        assert_eq!(run_without(&ppc), None);
        let data = Facts {
            mach_o: false,
            archs: vec![],
            ..ok
        };
        assert_eq!(run_without(&data), None);
    }

    #[test]
    fn macos_architectures_scripts_and_other_files() {
        // Intel Homebrew's git under Rosetta: fine with a universal library,
        // fatal with a thin arm64 one.
        let intel_git = Facts {
            archs: vec![Arch::X86_64],
            ..mac("/usr/local/bin/git")
        };
        assert_eq!(judge_macos(&intel_git), Verdict::Loads);
        let thin_lib = Facts {
            lib_archs: vec![Arch::Arm64],
            ..intel_git.clone()
        };
        assert!(
            matches!(judge_macos(&thin_lib), Verdict::WontLoad(w, _) if w.contains("runs as x86_64") && w.contains("kill"))
        );
        // Facts read from fake headers.
        let dir = std::env::temp_dir().join(format!("munmapq-doctor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            file_facts(&p).unwrap()
        };
        let fat = write(
            "fat",
            &macho::fake::fat(&[macho::fake::CPU_X86_64, macho::fake::CPU_ARM64E]),
        );
        assert!(fat.mach_o && fat.archs == [Arch::X86_64, Arch::Arm64e]);
        // An arm64e + x86_64 program: Apple Silicon picks the arm64e slice
        // (and refuses it: not Apple's, no boot-arg).
        let fat = Facts {
            lib_archs: vec![Arch::Arm64, Arch::X86_64],
            ..fat
        };
        assert!(matches!(judge_macos(&fat), Verdict::WontLoad(w, _) if w.contains("arm64e")));
        for (name, text) in [
            ("sh", "#!/bin/sh\nexec git \"$@\"\n"),
            ("env", "#!/usr/bin/env python3\n"),
        ] {
            let f = write(name, text.as_bytes());
            assert!(
                matches!(judge_macos(&f), Verdict::WontLoad(w, _) if w.contains("System Integrity")),
                "{name}"
            );
        }
        let brew_py = write("py", b"#!/opt/homebrew/bin/python3\n");
        assert!(
            matches!(judge_macos(&brew_py), Verdict::WontLoad(_, i) if i.contains("doctor /opt/homebrew/bin/python3"))
        );
        let data = write("data", b"just text");
        assert!(
            matches!(judge_macos(&data), Verdict::WontLoad(w, _) if w.contains("neither a Mach-O"))
        );
        let elf = write("elf", b"\x7fELF\x02\x01\x01\0\0\0");
        assert!(!elf.mach_o && matches!(judge_macos(&elf), Verdict::WontLoad(..)));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
