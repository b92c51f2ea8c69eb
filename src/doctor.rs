//! `munmapq doctor COMMAND`: would the library load into COMMAND, and if
//! not, why and what to do instead. Injection that silently does nothing is
//! the main way a preload tool fails its users.
//!
//! Facts are gathered per system (ELF headers on Linux; Mach-O headers and
//! `codesign` on macOS) and judged by pure functions, unit-tested on fake
//! facts.

use crate::macho::{self, Arch, Host};
use crate::program::{resolve, shebang, sip_protected_file};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A line on stdout; a closed pipe (`munmapq doctor git | head -1`) is
/// not an error worth a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// What decides whether a preloaded library reaches a program.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Facts {
    pub path: PathBuf,
    pub setuid: bool,
    pub setgid: bool,
    /// Linux: an ELF file.
    pub elf: bool,
    /// Linux: the program interpreter (PT_INTERP), none for static binaries.
    pub interpreter: Option<String>,
    /// A script: its `#!` interpreter.
    pub shebang: Option<String>,
    /// Linux: built with AddressSanitizer, and how.
    pub asan: Option<crate::elf::Asan>,
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

/// The Linux rules.
pub fn judge_linux(f: &Facts) -> Verdict {
    let no = |why: &str, instead: &str| Verdict::WontLoad(why.into(), instead.into());
    if f.setuid || f.setgid {
        return no(
            "it is setuid/setgid: the dynamic linker runs it in secure mode and ignores LD_PRELOAD",
            "run an ordinary (not set-id) copy of the program",
        );
    }
    // `run` follows #! lines to the program first; facts of a script
    // itself mean its interpreter could not be followed.
    if let Some(sh) = &f.shebang {
        return Verdict::WontLoad(
            format!("it is a script (#!{sh}): the library loads into the program that runs it"),
            "run `munmapq doctor` on the script: it follows #! lines to that program".into(),
        );
    }
    if !f.elf {
        return no(
            "it is not an ELF executable",
            "point munmapq at the real program",
        );
    }
    match &f.interpreter {
        None => no(
            "it is statically linked: there is no dynamic linker to preload anything",
            "use a dynamically linked build of the program (e.g. your distribution's package)",
        ),
        Some(i) if i.contains("musl") => no(
            "it uses musl's dynamic linker; libmunmapq is built for glibc",
            "build munmapq for the musl target, or use a glibc build of the program",
        ),
        Some(i) if !i.contains("ld-linux") && !i.contains("ld64.so") => Verdict::WontLoad(
            format!("its dynamic linker {i} is not glibc's"),
            "use a glibc build of the program".into(),
        ),
        Some(_) => match crate::asan::judge(f.asan.as_ref(), f.asan_check_off) {
            Err((why, instead)) => Verdict::WontLoad(why, instead),
            Ok(_) => Verdict::Loads,
        },
    }
}

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

/// Parses `codesign -dv --entitlements - <path>` output (stderr and stdout
/// together) into the code-signing facts.
#[cfg_attr(not(target_os = "macos"), allow(dead_code))] // macOS and tests
pub fn parse_codesign(text: &str, f: &mut Facts) {
    for line in text.lines() {
        if let Some(rest) = line.trim().strip_prefix("CodeDirectory ") {
            if let Some(flags) = rest
                .split_whitespace()
                .find_map(|w| w.strip_prefix("flags="))
            {
                let hex = flags
                    .split('(')
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("0x");
                let v = u32::from_str_radix(hex, 16).unwrap_or(0);
                // xnu osfmk/kern/cs_blobs.h: CS_RUNTIME, CS_REQUIRE_LV, CS_RESTRICT.
                f.hardened_runtime |= v & 0x1_0000 != 0;
                f.library_validation |= v & 0x2000 != 0;
                f.cs_restrict |= v & 0x800 != 0;
            }
        }
        // Printed for a signature whose CodeDirectory names a platform:
        // Apple's own programs.
        if line.trim().starts_with("Platform identifier=") {
            f.platform_binary = true;
        }
    }
    // The value after the key, up to the next key, in either output form
    // (`[Key] k [Value] [Bool] true` or `<key>k</key><true/>`).
    let entitled = |key: &str| match text.split_once(key) {
        None => false,
        Some((_, after)) => {
            let next = after
                .find("[Key]")
                .or(after.find("<key>"))
                .unwrap_or(after.len());
            let value = &after[..next];
            value.contains("<true/>") || value.contains("[Bool] true")
        }
    };
    f.allows_dyld_env = entitled("com.apple.security.cs.allow-dyld-environment-variables");
    f.disables_library_validation = entitled("com.apple.security.cs.disable-library-validation");
}

/// What the file itself says: set-id bits, script or ELF, interpreter,
/// AddressSanitizer.
pub fn file_facts(path: &Path) -> std::io::Result<Facts> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)?.permissions().mode();
    let data = macho::head(path)?;
    let mut f = Facts {
        path: path.to_path_buf(),
        setuid: mode & 0o4000 != 0,
        setgid: mode & 0o2000 != 0,
        ..Facts::default()
    };
    if let Some(interp) = shebang(&data) {
        f.shebang = Some(interp);
    } else if let Some(archs) = macho::archs(&data) {
        f.mach_o = true;
        f.archs = archs;
    } else if data.starts_with(b"\x7fELF") {
        f.elf = true;
        f.interpreter = crate::elf::interpreter(path);
        (f.asan, f.asan_check_off) = crate::asan::facts(path);
    }
    Ok(f)
}

/// macOS facts the file itself gives, for `f.host` (set it first): whether
/// it really is (symlinks resolved) on a SIP-protected path, and whether
/// the slice the kernel runs has dyld's `__RESTRICT,__restrict` section.
/// Not cfg-gated: Linux tests it on fake Mach-O files.
#[cfg_attr(not(target_os = "macos"), allow(dead_code))] // macOS and tests
pub fn mach_o_facts(f: &mut Facts) {
    f.sip_protected = sip_protected_file(&f.path);
    if let Some(slice) = running_slice(f) {
        f.restrict_section = macho::slice_load_commands(&f.path, slice)
            .ok()
            .and_then(|v| macho::restricted(&v))
            .unwrap_or(false);
    }
}

/// The slice of the file the kernel runs: `macho::process_arch`, except
/// that Rosetta's x86_64 process may come from an x86_64h slice.
fn running_slice(f: &Facts) -> Option<Arch> {
    let p = macho::process_arch(&f.archs, f.host)?;
    Some(if p == Arch::X86_64 && !f.archs.contains(&p) {
        Arch::X86_64h
    } else {
        p
    })
}

/// macOS: the code-signing facts, from `codesign -dv --entitlements -`
/// (of the slice the kernel runs, `-a`, for a universal file).
#[cfg(target_os = "macos")]
pub fn signing_facts(f: &mut Facts) {
    let mut args: Vec<std::ffi::OsString> = vec!["-dv".into(), "--entitlements".into(), "-".into()];
    if f.archs.len() > 1 {
        if let Some(name) = running_slice(f).and_then(|a| a.tool_name()) {
            args.extend(["-a".into(), name.into()]);
        }
    }
    args.push(f.path.clone().into_os_string());
    let text = std::process::Command::new("codesign")
        .args(&args)
        .output()
        .map(|o| {
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        })
        .unwrap_or_default();
    parse_codesign(&text, f);
}

#[cfg(target_os = "macos")]
fn platform_facts(f: &mut Facts) {
    f.host = Host::this();
    f.arm64e_preview_abi = macho::arm64e_preview_abi(&macho::bootargs());
    mach_o_facts(f);
    signing_facts(f);
    if let Ok(lib) = crate::library::find_library(None) {
        f.lib_archs = crate::platform::library_archs(&lib);
    }
}

#[cfg(not(target_os = "macos"))]
fn platform_facts(_f: &mut Facts) {}

pub fn judge(f: &Facts) -> Verdict {
    if cfg!(target_os = "macos") {
        judge_macos(f)
    } else {
        judge_linux(f)
    }
}

/// The program that really runs `path`: itself, the real git when `path`
/// is this munmapq linked as git, and on Linux the end of its `#!` chain
/// (the steps said on the way). Err: the exit status.
fn program_of(path: PathBuf) -> Result<PathBuf, u8> {
    let say = |line: &str| say!("munmapq doctor: {line}");
    let mut path = path;
    if crate::gitwrap::is_me(&path) {
        let Some(real) = crate::gitwrap::real_git() else {
            say(&format!(
                "{}: munmapq itself (the git wrapper), and there is no other git in PATH",
                path.display()
            ));
            return Err(127);
        };
        say(&format!(
            "{}: munmapq itself, linked as git: the git wrapper, which runs {}",
            path.display(),
            real.display()
        ));
        path = real;
    }
    if !cfg!(target_os = "linux") {
        return Ok(path);
    }
    match crate::script::follow(&path) {
        Ok(chain) => {
            chain.steps.iter().for_each(|s| say(s));
            Ok(chain.program)
        }
        Err(e) => {
            say(&format!("{e}; the library would NOT load"));
            Err(1)
        }
    }
}

/// Runs the doctor on `command` (a program and its arguments: `doctor git
/// -c ... log` reads git's options as git would); answers the exit status
/// (0: the library would load).
pub fn run(command: &[OsString]) -> u8 {
    let cmd = command[0].to_string_lossy();
    let Some(path) = resolve(&cmd) else {
        say!("munmapq doctor: {cmd}: command not found");
        return 127;
    };
    let program = match program_of(path.clone()) {
        Ok(p) => p,
        Err(status) => return status,
    };
    let mut f = match file_facts(&program) {
        Ok(f) => f,
        Err(e) => {
            say!("munmapq doctor: {}: {e}", program.display());
            return 126;
        }
    };
    platform_facts(&mut f);
    if let Some(advice) = crate::gitcheck::doctor_lines(command) {
        say!("{advice}");
    }
    if Path::new(&*cmd).file_name().is_some_and(|n| n == "git") {
        for line in crate::gitwrap::doctor_lines(&command[1..]) {
            say!("munmapq doctor: {line}");
        }
    }
    let via_script = program != path && !crate::gitwrap::is_me(&path);
    match judge(&f) {
        Verdict::Loads => {
            if let Ok(Some(note)) = crate::asan::judge(f.asan.as_ref(), f.asan_check_off) {
                say!("munmapq doctor: {}: {note}", program.display());
            }
            say!(
                "munmapq doctor: {}: the library would load (dynamically linked{}{}){}",
                program.display(),
                f.interpreter
                    .as_deref()
                    .map(|i| format!(", {i}"))
                    .unwrap_or_default(),
                if f.mach_o {
                    format!(
                        ", {} into {}",
                        macho::names(&f.lib_archs),
                        macho::names(&f.archs)
                    )
                } else {
                    String::new()
                },
                if via_script {
                    ", and from there into the dynamically linked programs the script starts"
                } else {
                    ""
                }
            );
            0
        }
        Verdict::WontLoad(why, instead) => {
            say!(
                "munmapq doctor: {}: the library would NOT load: {why}",
                program.display()
            );
            say!("munmapq doctor: instead: {instead}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linux(interp: Option<&str>) -> Facts {
        Facts {
            elf: true,
            interpreter: interp.map(String::from),
            ..Facts::default()
        }
    }

    #[test]
    fn linux_rules() {
        assert_eq!(
            judge_linux(&linux(Some("/lib64/ld-linux-x86-64.so.2"))),
            Verdict::Loads
        );
        assert_eq!(
            judge_linux(&linux(Some("/lib/ld-linux-aarch64.so.1"))),
            Verdict::Loads
        );
        assert!(
            matches!(judge_linux(&linux(None)), Verdict::WontLoad(w, _) if w.contains("statically"))
        );
        assert!(
            matches!(judge_linux(&linux(Some("/lib/ld-musl-x86_64.so.1"))), Verdict::WontLoad(w, _) if w.contains("musl"))
        );
        let suid = Facts {
            setuid: true,
            ..linux(Some("/lib64/ld-linux-x86-64.so.2"))
        };
        assert!(matches!(judge_linux(&suid), Verdict::WontLoad(w, _) if w.contains("setuid")));
        let script = Facts {
            shebang: Some("/bin/sh".into()),
            ..Facts::default()
        };
        assert!(
            matches!(judge_linux(&script), Verdict::WontLoad(w, i) if w.contains("script") && !i.contains("/usr/bin/env"))
        );
        let asan = Facts {
            asan: Some(crate::elf::Asan::Shared("libasan.so.8".into())),
            ..linux(Some("/lib64/ld-linux-x86-64.so.2"))
        };
        assert!(
            matches!(judge_linux(&asan), Verdict::WontLoad(w, i) if w.contains("AddressSanitizer") && i.contains("verify_asan_link_order=0"))
        );
        let asan_off = Facts {
            asan_check_off: true,
            ..asan
        };
        assert_eq!(judge_linux(&asan_off), Verdict::Loads);
    }

    fn mac(path: &str) -> Facts {
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
    fn macos_restricted_programs() {
        let restrict_flag = Facts {
            cs_restrict: true,
            ..mac("/opt/x")
        };
        assert!(
            matches!(judge_macos(&restrict_flag), Verdict::WontLoad(w, _) if w.contains("restrict flag (0x800)"))
        );
        let section = Facts {
            restrict_section: true,
            ..mac("/opt/x")
        };
        assert!(
            matches!(judge_macos(&section), Verdict::WontLoad(w, _) if w.contains("__RESTRICT,__restrict"))
        );
        // Read from fake files: the section counts in the slice that runs.
        let dir = std::env::temp_dir().join(format!("munmapq-restrict-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let facts = |name: &str, bytes: Vec<u8>| {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            let mut f = file_facts(&p).unwrap();
            f.lib_archs = vec![Arch::Arm64, Arch::X86_64];
            mach_o_facts(&mut f);
            f
        };
        use macho::fake::{macho, universal, CPU_ARM64, CPU_X86_64, RESTRICT, TEXT};
        let arm = |segs: &[macho::fake::Segment]| macho(CPU_ARM64.0, CPU_ARM64.1, true, segs);
        let x86 = |segs: &[macho::fake::Segment]| macho(CPU_X86_64.0, CPU_X86_64.1, true, segs);
        let plain = facts("plain", arm(&[TEXT]));
        assert!(plain.mach_o && !plain.restrict_section && !plain.sip_protected);
        assert_eq!(judge_macos(&plain), Verdict::Loads);
        let thin = facts("thin", arm(&[TEXT, RESTRICT]));
        assert!(thin.restrict_section);
        assert!(run_without(&thin).unwrap().contains("__RESTRICT"));
        // Universal: Apple Silicon runs the arm64 slice, Intel the x86_64 one.
        let fat = facts("fat", universal(&[x86(&[TEXT, RESTRICT]), arm(&[TEXT])]));
        assert!(!fat.restrict_section);
        let mut intel = Facts {
            host: Host::Intel,
            ..fat
        };
        mach_o_facts(&mut intel);
        assert!(intel.restrict_section);
        // Rosetta runs an x86_64h slice (as x86_64): that slice is read.
        let haswell = facts("haswell", macho(CPU_X86_64.0, 8, true, &[TEXT, RESTRICT]));
        assert!(haswell.archs == [Arch::X86_64h] && haswell.restrict_section);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn macos_sip_through_a_symlink() {
        let (dir, link) = crate::program::sh_symlink("siplink");
        let mut f = Facts {
            path: link,
            mach_o: true,
            archs: vec![Arch::Arm64],
            lib_archs: vec![Arch::Arm64, Arch::X86_64],
            ..Facts::default()
        };
        mach_o_facts(&mut f);
        assert!(f.sip_protected);
        assert!(
            matches!(judge_macos(&f), Verdict::WontLoad(w, _) if w.contains("System Integrity"))
        );
        let _ = std::fs::remove_dir_all(&dir);
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

    #[test]
    fn codesign_output() {
        let text = "Executable=/x\nCodeDirectory v=20500 size=1 flags=0x10000(runtime) hashes=1+7 location=embedded\n\
            [Dict]\n\t[Key] com.apple.security.cs.allow-dyld-environment-variables\n\t[Value]\n\t\t[Bool] true\n";
        let mut f = Facts::default();
        parse_codesign(text, &mut f);
        assert!(
            f.hardened_runtime
                && f.allows_dyld_env
                && !f.disables_library_validation
                && !f.library_validation
        );
        let xml = "CodeDirectory v=1 flags=0x2000(library-validation)\n<key>com.apple.security.cs.disable-library-validation</key><true/>";
        let mut g = Facts::default();
        parse_codesign(xml, &mut g);
        assert!(g.library_validation && g.disables_library_validation && !g.hardened_runtime);
        assert!(!g.cs_restrict && !g.platform_binary);
        // The restrict flag among others, and an Apple program's platform.
        let text = "Executable=/x\nFormat=Mach-O thin (arm64e)\nCodeDirectory v=20400 size=776 flags=0x10a00(kill,restrict,runtime) hashes=14+7 location=embedded\nPlatform identifier=15\n";
        let mut h = Facts::default();
        parse_codesign(text, &mut h);
        assert!(h.cs_restrict && h.hardened_runtime && h.platform_binary && !h.library_validation);
        let mut u = Facts::default();
        parse_codesign("/x: code object is not signed at all\n", &mut u);
        assert_eq!(u, Facts::default());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_elf_interpreters() {
        let f = file_facts(Path::new("/bin/sh")).unwrap();
        assert!(f.elf || f.shebang.is_some());
        let me = file_facts(&std::env::current_exe().unwrap()).unwrap();
        assert!(me.interpreter.unwrap().contains("ld-"));
    }
}
