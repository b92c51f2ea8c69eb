//! Mach-O architectures, read from the file header, and dyld's rule for
//! which library slice a process loads. Pure functions on bytes, so they
//! are tested on Linux with fake headers; macOS uses them to keep dyld from
//! killing a program (an inserted dylib that cannot load is fatal: dyld
//! logs "terminating because inserted dylib ... could not be loaded",
//! dyld-1378 dyld/DyldRuntimeState.cpp).
//!
//! Header layouts: xnu EXTERNAL_HEADERS/mach-o/loader.h (`mach_header_64`)
//! and mach-o/fat.h (`fat_header`, `fat_arch`, `fat_arch_64`: big-endian);
//! CPU types and subtypes: xnu osfmk/mach/machine.h.

// Linux uses these in the doctor's judgement and in tests only.
#![cfg_attr(not(target_os = "macos"), allow(dead_code))]

const MH_MAGIC_64: u32 = 0xfeed_facf;
const MH_MAGIC: u32 = 0xfeed_face;
const FAT_MAGIC: u32 = 0xcafe_babe;
const FAT_MAGIC_64: u32 = 0xcafe_babf;
const CPU_ARCH_ABI64: u32 = 0x0100_0000;
const CPU_TYPE_X86_64: u32 = 7 | CPU_ARCH_ABI64;
const CPU_TYPE_ARM64: u32 = 12 | CPU_ARCH_ABI64;
/// The capability bits of a subtype (arm64e's pointer-auth ABI version).
const CPU_SUBTYPE_MASK: u32 = 0xff00_0000;
const CPU_SUBTYPE_X86_64_H: u32 = 8;
const CPU_SUBTYPE_ARM64E: u32 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    X86_64h,
    Arm64,
    Arm64e,
    /// Anything else (i386, ppc, ...): (cputype, cpusubtype).
    Other(u32, u32),
}

impl Arch {
    fn from_cpu(cputype: u32, subtype: u32) -> Arch {
        match (cputype, subtype & !CPU_SUBTYPE_MASK) {
            (CPU_TYPE_X86_64, CPU_SUBTYPE_X86_64_H) => Arch::X86_64h,
            (CPU_TYPE_X86_64, _) => Arch::X86_64,
            (CPU_TYPE_ARM64, CPU_SUBTYPE_ARM64E) => Arch::Arm64e,
            (CPU_TYPE_ARM64, 0 | 1) => Arch::Arm64, // ALL, and V8 (dyld's arm64_alt)
            (t, s) => Arch::Other(t, s),
        }
    }

    pub fn name(self) -> String {
        match self {
            Arch::X86_64 => "x86_64".into(),
            Arch::X86_64h => "x86_64h".into(),
            Arch::Arm64 => "arm64".into(),
            Arch::Arm64e => "arm64e".into(),
            Arch::Other(t, s) => format!("cpu {t:#x}/{s}"),
        }
    }
}

/// "arm64 + x86_64".
pub fn names(archs: &[Arch]) -> String {
    if archs.is_empty() {
        return "no Mach-O slice".into();
    }
    let v: Vec<String> = archs.iter().map(|a| a.name()).collect();
    v.join(" + ")
}

fn be32(d: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_be_bytes(d.get(off..off + 4)?.try_into().ok()?))
}

fn le32(d: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(off..off + 4)?.try_into().ok()?))
}

/// The architectures of a Mach-O file (thin or universal) from its first
/// bytes (4 KiB are plenty), or None if it is not a Mach-O file.
pub fn archs(head: &[u8]) -> Option<Vec<Arch>> {
    match be32(head, 0)? {
        magic @ (FAT_MAGIC | FAT_MAGIC_64) => {
            let n = be32(head, 4)? as usize;
            // Java class files share 0xcafebabe; their "count" is a version >= 45.
            if n == 0 || n > 32 {
                return None;
            }
            let size = if magic == FAT_MAGIC { 20 } else { 32 };
            (0..n)
                .map(|i| {
                    let at = 8 + i * size;
                    Some(Arch::from_cpu(be32(head, at)?, be32(head, at + 4)?))
                })
                .collect()
        }
        _ => match le32(head, 0)? {
            MH_MAGIC_64 | MH_MAGIC => Some(vec![Arch::from_cpu(le32(head, 4)?, le32(head, 8)?)]),
            _ => None,
        },
    }
}

/// The first 4 KiB of a file.
pub fn head(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut v = Vec::with_capacity(4096);
    std::fs::File::open(path)?.take(4096).read_to_end(&mut v)?;
    Ok(v)
}

/// The kind of Mac: what its processes can be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Host {
    /// arm64e (Apple's own programs), arm64, and x86_64 under Rosetta.
    #[default]
    AppleSilicon,
    Intel,
}

impl Host {
    /// Every process architecture this Mac can run.
    pub fn process_archs(self) -> &'static [Arch] {
        match self {
            Host::AppleSilicon => &[Arch::Arm64e, Arch::Arm64, Arch::X86_64],
            Host::Intel => &[Arch::X86_64h, Arch::X86_64],
        }
    }

    /// This Mac. `hw.optional.arm64` is 1 on Apple Silicon, also inside a
    /// process translated by Rosetta.
    #[cfg(target_os = "macos")]
    pub fn this() -> Host {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>();
        // SAFETY: a NUL-terminated name and an out-buffer of `len` bytes.
        let r = unsafe {
            libc::sysctlbyname(
                c"hw.optional.arm64".as_ptr(),
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        if r == 0 && v == 1 {
            Host::AppleSilicon
        } else {
            Host::Intel
        }
    }
}

/// The architecture a process of `program` runs as on `host`: the slice
/// the kernel picks. On Apple Silicon a third-party arm64e slice does not
/// run at all without the `-arm64e_preview_abi` boot-arg (xnu
/// bsd/kern/kern_exec.c), so a program with an arm64 slice runs as arm64;
/// one with arm64e and no arm64 slice is taken to run as arm64e (Apple's
/// own). None: it cannot run here.
pub fn process_arch(program: &[Arch], host: Host) -> Option<Arch> {
    let has = |a: Arch| program.contains(&a);
    match host {
        Host::AppleSilicon => [Arch::Arm64, Arch::Arm64e, Arch::X86_64, Arch::X86_64h]
            .into_iter()
            .find(|&a| has(a))
            // Rosetta runs an x86_64h slice as x86_64.
            .map(|a| if a == Arch::X86_64h { Arch::X86_64 } else { a }),
        Host::Intel => [Arch::X86_64h, Arch::X86_64].into_iter().find(|&a| has(a)),
    }
}

/// dyld's rule: does a process of `process` find a slice it loads in a
/// library of `lib`? dyld-1378 mach_o/GradedArchitectures.cpp: an x86_64
/// process loads x86_64 (`archs_mac`; x86_64h too on a Haswell CPU,
/// `archs_macHaswell`), an arm64 one arm64 (`archs_arm64`), an arm64e one
/// only arm64e (`archs_arm64e`; arm64 only with pointer authentication off,
/// `archs_arm64e_keysOff`, which dyld/DyldProcessConfig.cpp `getMainArchs`
/// sets for arm64 programs or `ptrauth_disabled`).
pub fn loads_into(lib: &[Arch], process: Arch) -> bool {
    match process {
        Arch::X86_64h => lib.contains(&Arch::X86_64h) || lib.contains(&Arch::X86_64),
        p => lib.contains(&p),
    }
}

/// Why dyld would kill `program` with `lib` inserted, or None when it loads
/// (or the program cannot run here at all, which dyld never gets to).
pub fn would_kill(program: &[Arch], lib: &[Arch], host: Host) -> Option<String> {
    let process = process_arch(program, host)?;
    (!loads_into(lib, process)).then(|| {
        format!(
            "it runs as {} and the library has {}: dyld would refuse the library and kill the program",
            process.name(),
            names(lib)
        )
    })
}

/// Architectures a process of this Mac can be that `lib` does not serve:
/// a library exported to everything a shell starts must serve them all.
pub fn unserved(lib: &[Arch], host: Host) -> Vec<Arch> {
    host.process_archs()
        .iter()
        .copied()
        .filter(|&p| !loads_into(lib, p))
        .collect()
}

#[cfg(test)]
pub mod fake {
    use super::*;

    /// A thin 64-bit Mach-O header.
    pub fn thin(cpu: u32, sub: u32) -> Vec<u8> {
        let mut v = Vec::new();
        for w in [MH_MAGIC_64, cpu, sub, 2, 0, 0, 0, 0] {
            v.extend_from_slice(&w.to_le_bytes());
        }
        v
    }

    /// A universal header with one `fat_arch` per (cputype, subtype).
    pub fn fat(slices: &[(u32, u32)]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&FAT_MAGIC.to_be_bytes());
        v.extend_from_slice(&(slices.len() as u32).to_be_bytes());
        for (i, &(cpu, sub)) in slices.iter().enumerate() {
            for w in [cpu, sub, 0x4000 * (i as u32 + 1), 0x1000, 14] {
                v.extend_from_slice(&w.to_be_bytes());
            }
        }
        v
    }

    pub const CPU_ARM64: (u32, u32) = (CPU_TYPE_ARM64, 0);
    /// arm64e with the pointer-auth ABI bits set, as real binaries have.
    pub const CPU_ARM64E: (u32, u32) = (CPU_TYPE_ARM64, 0x8000_0002);
    pub const CPU_X86_64: (u32, u32) = (CPU_TYPE_X86_64, 3);
}

#[cfg(test)]
mod tests {
    use super::fake::*;
    use super::*;
    use Arch::*;

    #[test]
    fn reads_thin_and_fat_headers() {
        assert_eq!(archs(&thin(CPU_ARM64.0, CPU_ARM64.1)), Some(vec![Arm64]));
        assert_eq!(archs(&thin(CPU_ARM64E.0, CPU_ARM64E.1)), Some(vec![Arm64e]));
        assert_eq!(archs(&thin(CPU_X86_64.0, 0x8000_0003)), Some(vec![X86_64]));
        assert_eq!(
            archs(&fat(&[CPU_X86_64, CPU_ARM64])),
            Some(vec![X86_64, Arm64])
        );
        assert_eq!(
            archs(&fat(&[CPU_X86_64, (CPU_X86_64.0, 8), CPU_ARM64E])),
            Some(vec![X86_64, X86_64h, Arm64e])
        );
        assert_eq!(archs(b"#!/bin/sh\necho hi\n"), None);
        assert_eq!(archs(b"\x7fELF\x02\x01\x01"), None);
        assert_eq!(archs(b""), None);
        // A Java class file: 0xcafebabe, then its version.
        assert_eq!(archs(&[0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 52]), None);
        // A truncated fat header is not a list of architectures.
        assert_eq!(archs(&fat(&[CPU_X86_64, CPU_ARM64])[..30]), None);
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
        // ...and a universal one still kills an arm64e-only program.
        assert!(would_kill(&[Arm64e], &universal, si)
            .unwrap()
            .contains("runs as arm64e"));
        // A program with an arm64 slice runs as arm64 (third-party arm64e needs a boot-arg).
        assert_eq!(would_kill(&[Arm64e, Arm64], &universal, si), None);
        // Intel: x86_64h programs load x86_64 libraries; arm64 ones never run.
        assert_eq!(
            would_kill(&[X86_64h, X86_64], &universal, Host::Intel),
            None
        );
        assert_eq!(would_kill(&[Arm64], &[X86_64], Host::Intel), None);
        assert!(would_kill(&[X86_64], &[Arm64], Host::Intel).is_some());
    }

    #[test]
    fn what_a_shell_wide_library_must_serve() {
        assert_eq!(unserved(&[Arm64, X86_64], Host::AppleSilicon), vec![Arm64e]);
        assert_eq!(unserved(&[Arm64], Host::AppleSilicon), vec![Arm64e, X86_64]);
        assert!(unserved(&[Arm64e, Arm64, X86_64], Host::AppleSilicon).is_empty());
        assert!(unserved(&[Arm64, X86_64], Host::Intel).is_empty());
        assert_eq!(unserved(&[Arm64], Host::Intel), vec![X86_64h, X86_64]);
    }
}
