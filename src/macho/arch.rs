//! A slice's architecture, from its CPU type and subtype.

const CPU_ARCH_ABI64: u32 = 0x0100_0000;
pub(super) const CPU_TYPE_X86_64: u32 = 7 | CPU_ARCH_ABI64;
pub(super) const CPU_TYPE_ARM64: u32 = 12 | CPU_ARCH_ABI64;
/// The capability bits of a subtype (arm64e's pointer-auth ABI version).
const CPU_SUBTYPE_MASK: u32 = 0xff00_0000;
const CPU_SUBTYPE_X86_64_H: u32 = 8;
pub(super) const CPU_SUBTYPE_ARM64E: u32 = 2;
/// `CPU_SUBTYPE_PTRAUTH_ABI`: the arm64e slice carries an ABI version.
const CPU_SUBTYPE_PTRAUTH_ABI: u32 = 0x8000_0000;
/// arm64e as clang emits it for macOS, and the only arm64e slice dyld
/// loads into an arm64e process (dyld-1378 mach_o/Architecture.cpp:
/// `Architecture::arm64e` is `CPU_SUBTYPE_ARM64E | 0x80000000`, and
/// `operator==` compares an arm64 subtype's capability bits too).
const SUBTYPE_ARM64E_V0: u32 = CPU_SUBTYPE_PTRAUTH_ABI | CPU_SUBTYPE_ARM64E;
/// dyld's `Architecture::arm64e_v1`, a future pointer-auth ABI.
pub(super) const SUBTYPE_ARM64E_V1: u32 = 0x8100_0000 | CPU_SUBTYPE_ARM64E;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    X86_64h,
    Arm64,
    /// arm64e with pointer-auth ABI version 0 and the versioned-ABI bit
    /// (subtype 0x80000002): what the toolchain builds.
    Arm64e,
    /// Any other arm64e subtype, kept whole: unversioned (0x00000002, dyld's
    /// `arm64e_old`) or another ABI version (0x81000002 is `arm64e_v1`).
    Arm64eOther(u32),
    /// Anything else (i386, ppc, ...): (cputype, cpusubtype).
    Other(u32, u32),
}

impl Arch {
    pub(super) fn from_cpu(cputype: u32, subtype: u32) -> Arch {
        match (cputype, subtype & !CPU_SUBTYPE_MASK) {
            (CPU_TYPE_X86_64, CPU_SUBTYPE_X86_64_H) => Arch::X86_64h,
            (CPU_TYPE_X86_64, _) => Arch::X86_64,
            (CPU_TYPE_ARM64, CPU_SUBTYPE_ARM64E) if subtype == SUBTYPE_ARM64E_V0 => Arch::Arm64e,
            (CPU_TYPE_ARM64, CPU_SUBTYPE_ARM64E) => Arch::Arm64eOther(subtype),
            (CPU_TYPE_ARM64, 0 | 1) => Arch::Arm64, // ALL, and V8 (dyld's arm64_alt)
            (t, s) => Arch::Other(t, s),
        }
    }

    /// The pointer-auth ABI version of an arm64e slice
    /// (`CPU_SUBTYPE_ARM64_PTR_AUTH_VERSION`, xnu osfmk/mach/machine.h).
    pub(super) fn ptrauth_version(self) -> Option<u32> {
        match self {
            Arch::Arm64e => Some(0),
            Arch::Arm64eOther(s) => Some((s >> 24) & 0xf),
            _ => None,
        }
    }

    pub fn name(self) -> String {
        match self {
            Arch::X86_64 => "x86_64".into(),
            Arch::X86_64h => "x86_64h".into(),
            Arch::Arm64 => "arm64".into(),
            Arch::Arm64e => "arm64e".into(),
            Arch::Arm64eOther(s) if s & CPU_SUBTYPE_PTRAUTH_ABI == 0 => {
                "arm64e (unversioned ABI)".into()
            }
            Arch::Arm64eOther(s) => format!("arm64e (pointer-auth ABI v{})", (s >> 24) & 0xf),
            Arch::Other(t, s) => format!("cpu {t:#x}/{s}"),
        }
    }

    /// The name `codesign -a` and `lipo` take, for the slices they know.
    pub fn tool_name(self) -> Option<&'static str> {
        match self {
            Arch::X86_64 => Some("x86_64"),
            Arch::X86_64h => Some("x86_64h"),
            Arch::Arm64 => Some("arm64"),
            Arch::Arm64e => Some("arm64e"),
            _ => None,
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
