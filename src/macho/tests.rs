//! The Mach-O readers and rules, on fake files (and, ignored unless
//! scripts/macos-build.sh asks, on real linker output against LIEF).

use super::arch::*;
use super::fake::*;
use super::host::*;
use super::parse::*;
use super::slice_choice::*;
use Arch::*;

const ARM64E_OLD: Arch = Arm64eOther(CPU_SUBTYPE_ARM64E);
const ARM64E_V1: Arch = Arm64eOther(SUBTYPE_ARM64E_V1);

#[test]
fn reads_thin_and_fat_headers() {
    assert_eq!(archs(&thin(CPU_ARM64.0, CPU_ARM64.1)), Some(vec![Arm64]));
    assert_eq!(archs(&thin(CPU_ARM64E.0, CPU_ARM64E.1)), Some(vec![Arm64e]));
    // arm64e subtypes other than the versioned ABI 0 are kept whole.
    assert_eq!(archs(&thin(CPU_TYPE_ARM64, 2)), Some(vec![ARM64E_OLD]));
    assert_eq!(
        archs(&thin(CPU_TYPE_ARM64, 0x8100_0002)),
        Some(vec![ARM64E_V1])
    );
    assert_eq!(archs(&thin(CPU_X86_64.0, 0x8000_0003)), Some(vec![X86_64]));
    assert_eq!(
        archs(&fat(&[CPU_X86_64, CPU_ARM64])),
        Some(vec![X86_64, Arm64])
    );
    assert_eq!(
        archs(&fat(&[CPU_X86_64, (CPU_X86_64.0, 8), CPU_ARM64E])),
        Some(vec![X86_64, X86_64h, Arm64e])
    );
    assert_eq!(
        slices(&fat(&[CPU_X86_64, CPU_ARM64])).unwrap()[1],
        Slice {
            arch: Arm64,
            offset: 0x8000
        }
    );
    assert_eq!(archs(b"#!/bin/sh\necho hi\n"), None);
    assert_eq!(archs(b"\x7fELF\x02\x01\x01"), None);
    assert_eq!(archs(b""), None);
    // A Java class file: 0xcafebabe, then its version.
    assert_eq!(archs(&[0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 52]), None);
    // A truncated fat header is not a list of architectures.
    assert_eq!(archs(&fat(&[CPU_X86_64, CPU_ARM64])[..30]), None);
    assert_eq!(ARM64E_OLD.name(), "arm64e (unversioned ABI)");
    assert_eq!(ARM64E_V1.name(), "arm64e (pointer-auth ABI v1)");
}

#[test]
fn the_kernel_runs_the_arm64e_slice() {
    let si = Host::AppleSilicon;
    // arm64e outgrades arm64 whatever the order of the slices.
    assert_eq!(process_arch(&[Arm64e, Arm64], si), Some(Arm64e));
    assert_eq!(process_arch(&[Arm64, Arm64e, X86_64], si), Some(Arm64e));
    assert_eq!(process_arch(&[X86_64, Arm64e], si), Some(Arm64e));
    // Another ABI version grades 11, still above arm64's 9.
    assert_eq!(process_arch(&[Arm64, ARM64E_V1], si), Some(ARM64E_V1));
    assert_eq!(process_arch(&[ARM64E_V1, Arm64e], si), Some(Arm64e));
    // Equal grades: the first.
    assert_eq!(process_arch(&[ARM64E_OLD, Arm64e], si), Some(ARM64E_OLD));
    assert_eq!(process_arch(&[X86_64, Arm64], si), Some(Arm64));
    // Rosetta only without a native slice, and as x86_64.
    assert_eq!(process_arch(&[X86_64h, X86_64], si), Some(X86_64));
    assert_eq!(process_arch(&[X86_64h], si), Some(X86_64));
    assert_eq!(process_arch(&[Other(7, 3)], si), None);
    assert_eq!(process_arch(&[Arm64e, Arm64], Host::Intel), None);
    assert_eq!(process_arch(&[X86_64, X86_64h], Host::Intel), Some(X86_64h));

    // A third-party arm64e program (ABI 0) does not run without the
    // boot-arg; Apple's do; another ABI version runs (keys off).
    assert!(kernel_refuses(Arm64e, false, false));
    assert!(kernel_refuses(ARM64E_OLD, false, false));
    assert!(!kernel_refuses(Arm64e, true, false));
    assert!(!kernel_refuses(Arm64e, false, true));
    assert!(!kernel_refuses(ARM64E_V1, false, false));
    assert!(!kernel_refuses(Arm64, false, false));
    assert!(!kernel_refuses(X86_64, false, false));
}

#[test]
fn boot_args() {
    assert!(arm64e_preview_abi("-v -arm64e_preview_abi debug=0x14e"));
    assert!(arm64e_preview_abi("-arm64e_preview_abi"));
    assert!(!arm64e_preview_abi(""));
    assert!(!arm64e_preview_abi(
        "-arm64e_preview_abix arm64e_preview_abi"
    ));
}

#[test]
fn dyld_loads_by_pointer_authentication() {
    let universal = [Arm64, X86_64];
    // Keys on (arm64e ABI 0, also unversioned): an arm64e slice only.
    assert!(!loads_into(&universal, Arm64e));
    assert!(loads_into(&[Arm64e], Arm64e));
    assert!(loads_into(&[Arm64e], ARM64E_OLD));
    assert!(!loads_into(&[ARM64E_OLD, Arm64], Arm64e));
    // Keys off (arm64, arm64e of another ABI): arm64e or arm64.
    assert!(loads_into(&universal, Arm64));
    assert!(loads_into(&[Arm64e], Arm64));
    assert!(loads_into(&[ARM64E_V1], Arm64));
    assert!(loads_into(&universal, ARM64E_V1));
    assert!(!loads_into(&[ARM64E_OLD], Arm64));
    assert!(!loads_into(&[X86_64], Arm64));
    // x86_64: x86_64 (x86_64h too in an x86_64h process).
    assert!(loads_into(&universal, X86_64));
    assert!(!loads_into(&[X86_64h], X86_64));
    assert!(loads_into(&[X86_64], X86_64h));
}

#[test]
fn dyld_kills_what_the_library_cannot_serve() {
    let universal = [Arm64, X86_64];
    let si = Host::AppleSilicon;
    // Homebrew's arm64 git, Intel Homebrew under Rosetta, a fat program.
    assert_eq!(would_kill(&[Arm64], &universal, si), None);
    assert_eq!(would_kill(&[X86_64], &universal, si), None);
    assert_eq!(would_kill(&[X86_64, Arm64], &[Arm64], si), None);
    // A thin arm64 library kills an x86_64 (Rosetta) program...
    assert!(would_kill(&[X86_64], &[Arm64], si)
        .unwrap()
        .contains("runs as x86_64"));
    // ...and a universal one an arm64e program, fat with arm64 or not.
    for program in [&[Arm64e][..], &[Arm64e, Arm64], &[Arm64, Arm64e, X86_64]] {
        let why = would_kill(program, &universal, si).unwrap();
        assert!(
            why.contains("runs as arm64e, which loads only arm64e libraries"),
            "{why}"
        );
    }
    // arm64e of another ABI runs with keys off and loads arm64.
    assert_eq!(would_kill(&[ARM64E_V1, Arm64], &universal, si), None);
    assert!(would_kill(&[ARM64E_V1], &[X86_64], si)
        .unwrap()
        .contains("with pointer authentication off"));
    // Intel: x86_64h programs load x86_64 libraries; arm64 ones never run.
    assert_eq!(
        would_kill(&[X86_64h, X86_64], &universal, Host::Intel),
        None
    );
    assert_eq!(would_kill(&[Arm64], &[X86_64], Host::Intel), None);
    assert!(would_kill(&[X86_64], &[Arm64], Host::Intel).is_some());
}

#[test]
fn restrict_section_rule() {
    let (cpu, sub) = CPU_ARM64;
    assert_eq!(restricted(&macho(cpu, sub, true, &[TEXT])), Some(false));
    assert_eq!(
        restricted(&macho(cpu, sub, true, &[TEXT, RESTRICT])),
        Some(true)
    );
    assert_eq!(
        restricted(&macho(cpu, sub, true, &[RESTRICT, TEXT])),
        Some(true)
    );
    // The section's own segment name, else (64-bit) its segment's.
    let empty: Segment = ("__RESTRICT", &[("__restrict", "")]);
    assert_eq!(restricted(&macho(cpu, sub, true, &[empty])), Some(true));
    let other: Segment = ("__RESTRICT", &[("__restrict", "__DATA")]);
    assert_eq!(restricted(&macho(cpu, sub, true, &[other])), Some(false));
    let moved: Segment = ("__DATA", &[("__restrict", "__RESTRICT")]);
    assert_eq!(restricted(&macho(cpu, sub, true, &[moved])), Some(true));
    // Names are exact.
    for seg in [
        ("__RESTRICT", &[("__text", "__RESTRICT")][..]),
        ("__RESTRICTED", &[("__restrict", "__RESTRICTED")]),
        ("__restrict", &[("__restrict", "__restrict")]),
        ("__RESTRICT", &[]),
    ] {
        assert_eq!(
            restricted(&macho(cpu, sub, true, &[TEXT, seg])),
            Some(false),
            "{seg:?}"
        );
    }
    // 32-bit load commands; there dyld reads the section's segment name only.
    assert_eq!(
        restricted(&macho(7, 3, false, &[TEXT, RESTRICT])),
        Some(true)
    );
    assert_eq!(restricted(&macho(7, 3, false, &[empty])), Some(false));
    // Not Mach-O, truncated, or a malformed command size.
    assert_eq!(restricted(b"\xca\xfe\xba\xbe\0\0\0\x02"), None);
    let full = macho(cpu, sub, true, &[TEXT, RESTRICT]);
    assert_eq!(restricted(&full[..full.len() - 1]), None);
    let mut bad = full.clone();
    bad[36..40].copy_from_slice(&4u32.to_le_bytes());
    assert_eq!(restricted(&bad), None);
    let mut past = full;
    past[20..24].copy_from_slice(&100u32.to_le_bytes());
    assert_eq!(restricted(&past), None);
}

#[test]
fn restrict_section_of_a_slice_in_a_file() {
    let dir = std::env::temp_dir().join(format!("munmapq-macho-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let x86 = macho(CPU_X86_64.0, CPU_X86_64.1, true, &[TEXT]);
    let arm = macho(CPU_ARM64E.0, CPU_ARM64E.1, true, &[TEXT, RESTRICT]);
    let fat = dir.join("fat");
    std::fs::write(&fat, universal(&[x86.clone(), arm])).unwrap();
    let thin = dir.join("thin");
    std::fs::write(&thin, &x86).unwrap();
    let r = |p: &std::path::Path, a| restricted(&slice_load_commands(p, a).unwrap());
    assert_eq!(archs(&head(&fat).unwrap()), Some(vec![X86_64, Arm64e]));
    assert_eq!(r(&fat, Arm64e), Some(true));
    assert_eq!(r(&fat, X86_64), Some(false));
    assert_eq!(r(&thin, X86_64), Some(false));
    assert!(slice_load_commands(&fat, Arm64).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same rule on real linker output, against LIEF's reading of it:
/// scripts/macos-build.sh writes the cross-built launcher, a copy with
/// a `__RESTRICT,__restrict` section, and the universal library to a
/// directory, with LIEF's answer per slice in `lief.txt`
/// (inspect_macho.py --restrict-fixtures), and runs this test on them.
#[test]
#[ignore = "needs MUNMAPQ_MACHO_FIXTURES (scripts/macos-build.sh)"]
fn agrees_with_lief() {
    let dir = std::path::PathBuf::from(
        std::env::var_os("MUNMAPQ_MACHO_FIXTURES").expect("MUNMAPQ_MACHO_FIXTURES"),
    );
    let lief = std::fs::read_to_string(dir.join("lief.txt")).unwrap();
    let mut seen = [0, 0];
    for line in lief.lines() {
        let v: Vec<&str> = line.split(' ').collect();
        let (file, arch, restrict) = (dir.join(v[0]), v[1], v[2] == "1");
        let found = archs(&head(&file).unwrap()).unwrap();
        let a = *found
            .iter()
            .find(|a| match a {
                Arm64eOther(_) => arch == "arm64e",
                a => a.name() == arch,
            })
            .unwrap_or_else(|| panic!("{line}: we read {}", names(&found)));
        let ours = restricted(&slice_load_commands(&file, a).unwrap());
        assert_eq!(ours, Some(restrict), "{line}");
        seen[restrict as usize] += 1;
    }
    assert!(seen[0] > 0 && seen[1] > 0, "{lief}");
    println!("agrees with LIEF on {} slices", seen[0] + seen[1]);
}

/// Every prefix of a thin and of a universal file, and each with any one
/// byte of its headers and load commands flipped: the readers answer
/// (None or an architecture list, a rule's answer), never panic.
#[test]
fn damaged_headers_never_panic() {
    let thin = macho(CPU_ARM64.0, CPU_ARM64.1, true, &[TEXT, RESTRICT]);
    let thin32 = macho(7, 3, false, &[TEXT, RESTRICT]);
    let fat = universal(&[thin.clone(), thin32.clone()]);
    let dir = std::env::temp_dir().join(format!("munmapq-macho-damage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("f");
    let mut cases = 0;
    for good in [&thin, &thin32, &fat] {
        // The headers are in the first 0x200 bytes of each slice.
        let headers = || (0..good.len()).filter(|&i| i < 0x200 || (0x4000..0x4200).contains(&i));
        let mut damaged: Vec<Vec<u8>> = headers().map(|n| good[..n].to_vec()).collect();
        for (i, at) in headers().enumerate() {
            let mut v = good.clone();
            v[at] ^= [0xff, 0x80, 0x01, 0x7f][i % 4];
            damaged.push(v);
        }
        for bytes in damaged {
            let _ = archs(&bytes);
            let _ = restricted(&bytes);
            std::fs::write(&file, &bytes).unwrap();
            for arch in [Arm64, X86_64, Other(7, 3)] {
                if let Ok(cmds) = slice_load_commands(&file, arch) {
                    let _ = restricted(&cmds);
                }
            }
            cases += 1;
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(cases > 1000, "{cases}");
}
