//! What the doctor's macOS rules and the launcher read of a Mach-O
//! program beyond its header: whether it is on a SIP-protected path
//! (symlinks resolved), whether the slice that runs has dyld's
//! `__RESTRICT,__restrict` section, and its code signature (`codesign`).

use super::facts::Facts;
use crate::macho::{self, Arch};
use crate::program::sip_protected_file;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

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
    let text = cached_codesign(codesign_cache_dir().as_deref(), &f.path, &args, || {
        std::process::Command::new("codesign")
            .args(&args)
            .output()
            .map(|o| {
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )
            })
            .unwrap_or_default()
    });
    parse_codesign(&text, f);
}

/// Where `codesign`'s answers are kept: beside the git wrapper's cache
/// (`$XDG_CACHE_HOME/munmapq/codesign/`, else `~/.cache/...`).
#[cfg_attr(not(target_os = "macos"), allow(dead_code))] // macOS and tests
fn codesign_cache_dir() -> Option<PathBuf> {
    crate::git::cache::dir().and_then(|d| Some(d.parent()?.join("codesign")))
}

const CODESIGN_MAGIC: &str = "munmapq codesign 1";

/// What `codesign ARGS` says of `program`: `run`'s answer, kept in `cache`
/// per file identity (device, inode, size, mtime and ctime: what changes
/// when the file is written, replaced or re-signed) and arguments, as the
/// git wrapper keeps its decision (`git/cache.rs`), so that a program
/// outside SIP (Homebrew's git) costs one `codesign` run, not one per
/// launch. A file changed within the last second is not cached (its next
/// change could keep the same mtime); without a cache directory `run` runs
/// every time.
#[cfg_attr(not(target_os = "macos"), allow(dead_code))] // macOS and tests
fn cached_codesign(
    cache: Option<&Path>,
    program: &Path,
    args: &[OsString],
    run: impl FnOnce() -> String,
) -> String {
    use crate::git::cache::{identity, store};
    let mut key = identity(program);
    for a in args {
        key.push('\0');
        key.push_str(&a.to_string_lossy());
    }
    let key = key.replace('\n', " ");
    let name = format!("{:016x}", fnv(key.as_bytes()));
    let file = cache.map(|d| d.join(name));
    let head = format!("{CODESIGN_MAGIC}\n{key}\n");
    if let Some(text) = file.as_ref().and_then(|f| std::fs::read_to_string(f).ok()) {
        if let Some(answer) = text.strip_prefix(&head) {
            return answer.to_string();
        }
    }
    let answer = run();
    if let (Some(dir), Some(file)) = (cache, file) {
        if !answer.is_empty() && !written_this_second(program) {
            store(dir, &file, &format!("{head}{answer}"));
        }
    }
    answer
}

/// Whether `program`'s contents changed within the last second (a write
/// in the same mtime tick could go unseen). Its ctime is part of the
/// identity and moves with any change, to the nanosecond.
fn written_this_second(program: &Path) -> bool {
    use std::time::{Duration, SystemTime};
    std::fs::metadata(program)
        .and_then(|m| m.modified())
        .map_or(true, |t| {
            SystemTime::now()
                .duration_since(t)
                .map_or(true, |d| d < Duration::from_secs(1))
        })
}

/// FNV-1a, 64 bits: a file name for a key.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

#[cfg(test)]
mod tests {
    use super::super::facts::{file_facts, Verdict};
    use super::super::macos::{judge_macos, run_without, tests::mac};
    use super::*;
    use crate::macho::Host;

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

    /// `codesign` runs once per file identity and arguments: a second
    /// launch reads the answer back; a rewritten (or re-signed) program, or
    /// another slice, asks again; a file changed this second is not kept.
    #[test]
    fn codesign_verdict_cached_per_file_identity() {
        use std::cell::Cell;
        use std::time::{Duration, SystemTime};
        let dir = std::env::temp_dir().join(format!("munmapq-cscache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (cache, prog) = (dir.join("cache"), dir.join("git"));
        let settle = |p: &Path| {
            let old = SystemTime::now() - Duration::from_secs(60);
            std::fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(old)
                .unwrap();
        };
        std::fs::write(&prog, "v1").unwrap();
        let runs = Cell::new(0);
        let ask = |args: &[&str]| {
            let args: Vec<OsString> = args.iter().map(OsString::from).collect();
            cached_codesign(Some(&cache), &prog, &args, || {
                runs.set(runs.get() + 1);
                format!(
                    "CodeDirectory v=1 flags=0x10000(runtime) run {}\n",
                    runs.get()
                )
            })
        };
        // Just written: asked each time, nothing kept.
        ask(&["-dv"]);
        ask(&["-dv"]);
        assert_eq!(runs.get(), 2);
        settle(&prog);
        let first = ask(&["-dv"]);
        assert_eq!(runs.get(), 3);
        assert_eq!(ask(&["-dv"]), first, "read back");
        assert_eq!(ask(&["-dv"]), first);
        assert_eq!(runs.get(), 3, "one codesign for three launches");
        ask(&["-dv", "-a", "x86_64"]);
        assert_eq!(runs.get(), 4, "another slice asks again");
        std::fs::write(&prog, "v2, longer").unwrap();
        settle(&prog);
        assert_ne!(ask(&["-dv"]), first, "a rewritten program asks again");
        assert_eq!(runs.get(), 5);
        let mut f = Facts::default();
        parse_codesign(&ask(&["-dv"]), &mut f);
        assert!(f.hardened_runtime);
        assert_eq!(runs.get(), 5);
        // No cache directory: every launch asks.
        let args = [OsString::from("-dv")];
        cached_codesign(None, &prog, &args, || String::from("x"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
