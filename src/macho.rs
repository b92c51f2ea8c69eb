//! Mach-O architectures, read from the file header; which slice the kernel
//! runs and which library slices dyld then loads; dyld's `__RESTRICT`
//! rule. Pure functions on bytes, so they are tested on Linux with fake
//! headers; macOS uses them to keep dyld from killing a program (an
//! inserted dylib that cannot load is fatal: dyld logs "terminating because
//! inserted dylib ... could not be loaded", dyld-1378
//! dyld/DyldRuntimeState.cpp, `RuntimeState::loadInsertedLibraries`).
//!
//! Header layouts: xnu EXTERNAL_HEADERS/mach-o/loader.h (`mach_header_64`,
//! `segment_command_64`, `section_64` and their 32-bit forms) and
//! mach-o/fat.h (`fat_header`, `fat_arch`, `fat_arch_64`: big-endian);
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
/// `CPU_SUBTYPE_PTRAUTH_ABI`: the arm64e slice carries an ABI version.
const CPU_SUBTYPE_PTRAUTH_ABI: u32 = 0x8000_0000;
/// arm64e as clang emits it for macOS, and the only arm64e slice dyld
/// loads into an arm64e process (dyld-1378 mach_o/Architecture.cpp:
/// `Architecture::arm64e` is `CPU_SUBTYPE_ARM64E | 0x80000000`, and
/// `operator==` compares an arm64 subtype's capability bits too).
const SUBTYPE_ARM64E_V0: u32 = CPU_SUBTYPE_PTRAUTH_ABI | CPU_SUBTYPE_ARM64E;
/// dyld's `Architecture::arm64e_v1`, a future pointer-auth ABI.
const SUBTYPE_ARM64E_V1: u32 = 0x8100_0000 | CPU_SUBTYPE_ARM64E;
const LC_SEGMENT: u32 = 0x1;
const LC_SEGMENT_64: u32 = 0x19;

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
    fn from_cpu(cputype: u32, subtype: u32) -> Arch {
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
    fn ptrauth_version(self) -> Option<u32> {
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

fn be32(d: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_be_bytes(d.get(off..off + 4)?.try_into().ok()?))
}

fn be64(d: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_be_bytes(d.get(off..off + 8)?.try_into().ok()?))
}

fn le32(d: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(off..off + 4)?.try_into().ok()?))
}

/// One architecture of a file and where its Mach-O header starts (0 for a
/// thin file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    pub arch: Arch,
    pub offset: u64,
}

/// The slices of a Mach-O file (thin or universal) from its first bytes
/// (4 KiB are plenty), or None if it is not a Mach-O file.
pub fn slices(head: &[u8]) -> Option<Vec<Slice>> {
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
                    let arch = Arch::from_cpu(be32(head, at)?, be32(head, at + 4)?);
                    let offset = if magic == FAT_MAGIC {
                        be32(head, at + 8)? as u64
                    } else {
                        be64(head, at + 8)?
                    };
                    Some(Slice { arch, offset })
                })
                .collect()
        }
        _ => match le32(head, 0)? {
            MH_MAGIC_64 | MH_MAGIC => Some(vec![Slice {
                arch: Arch::from_cpu(le32(head, 4)?, le32(head, 8)?),
                offset: 0,
            }]),
            _ => None,
        },
    }
}

/// The architectures of a Mach-O file (thin or universal) from its first
/// bytes, or None if it is not a Mach-O file.
pub fn archs(head: &[u8]) -> Option<Vec<Arch>> {
    Some(slices(head)?.into_iter().map(|s| s.arch).collect())
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
    /// A slice of each kind of process this Mac can have, as far as dyld's
    /// choice of library slices goes (see `loads_into`): arm64e with
    /// pointer authentication on, arm64 (pointer authentication off; an
    /// arm64e slice of another ABI version runs so too), and x86_64.
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
        let mut v = [0u8; std::mem::size_of::<libc::c_int>()];
        let read = sysctl(c"hw.optional.arm64", &mut v).is_some();
        if read && libc::c_int::from_ne_bytes(v) == 1 {
            Host::AppleSilicon
        } else {
            Host::Intel
        }
    }
}

/// Does a boot-args line hold `-arm64e_preview_abi`, the flag that lets
/// the kernel run arm64e programs that are not part of macOS (xnu-11417
/// bsd/kern/kern_exec.c, `bootarg_arm64e_preview_abi`)?
pub fn arm64e_preview_abi(bootargs: &str) -> bool {
    bootargs
        .split_whitespace()
        .any(|a| a == "-arm64e_preview_abi")
}

/// `sysctlbyname(name)` read into `buf`: the length the kernel wrote,
/// none if the call failed.
#[cfg(target_os = "macos")]
pub fn sysctl(name: &std::ffi::CStr, buf: &mut [u8]) -> Option<usize> {
    let mut len = buf.len();
    // SAFETY: a NUL-terminated name and an out-buffer of `len` bytes.
    let r = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    (r == 0).then_some(len)
}

/// This Mac's boot-args (`kern.bootargs`, readable by anyone: xnu
/// bsd/kern/kern_sysctl.c, `sysctl_sysctl_bootargs`), "" if unreadable.
#[cfg(target_os = "macos")]
pub fn bootargs() -> String {
    let mut buf = [0u8; 1024];
    let Some(len) = sysctl(c"kern.bootargs", &mut buf) else {
        return String::new();
    };
    let s = &buf[..len.min(buf.len())];
    let s = s.split(|&c| c == 0).next().unwrap_or(b"");
    String::from_utf8_lossy(s).into_owned()
}

/// The kernel's preference for a slice on Apple Silicon, whose CPU subtype
/// is arm64e (xnu osfmk/arm64/cpu.c: `CPU_ARCH_ARMv8E`). xnu-11417
/// bsd/dev/arm/kern_machdep.c, `grade_binary` and `grade_arm64e_binary`:
/// arm64e of the current pointer-auth ABI (version 0 on macOS,
/// `CPU_SUBTYPE_ARM64_PTR_AUTH_CURRENT_VERSION` in osfmk/mach/machine.h)
/// 12, arm64e of another version 11, arm64 9 (V8 10). 0: not run natively.
fn apple_silicon_grade(a: Arch) -> u32 {
    match a.ptrauth_version() {
        Some(0) => 12,
        Some(_) => 11,
        None if a == Arch::Arm64 => 9,
        None => 0,
    }
}

/// The slice the kernel runs of a program with slices `program` on `host`,
/// None if none runs there. On Apple Silicon the best graded native slice
/// (xnu-11417 bsd/kern/mach_fat.c, `fatfile_getarch`: the first of the
/// highest grade), so a program with both an arm64 and an arm64e slice runs
/// its arm64e slice, whoever signed it; x86_64 under Rosetta only without a
/// native slice. Whether the kernel then agrees to run an arm64e slice is
/// `kernel_refuses`.
pub fn process_arch(program: &[Arch], host: Host) -> Option<Arch> {
    let has = |a: Arch| program.contains(&a);
    match host {
        Host::AppleSilicon => {
            let mut best: Option<(u32, Arch)> = None;
            for &a in program {
                let g = apple_silicon_grade(a);
                if g > 0 && best.is_none_or(|(bg, _)| g > bg) {
                    best = Some((g, a));
                }
            }
            match best {
                Some((_, a)) => Some(a),
                // Rosetta runs an x86_64h slice as x86_64.
                None => (has(Arch::X86_64) || has(Arch::X86_64h)).then_some(Arch::X86_64),
            }
        }
        Host::Intel => [Arch::X86_64h, Arch::X86_64].into_iter().find(|&a| has(a)),
    }
}

/// Does the kernel refuse to run the slice `process` it chose? xnu-11417
/// bsd/kern/kern_exec.c, `exec_mach_imgact`: an arm64e slice of pointer-auth
/// ABI version 0 that is not a platform binary (part of macOS) exits with
/// "not running binary ... built against preview arm64e ABI" unless the
/// Mac was booted with `-arm64e_preview_abi`. The exec is past its point of
/// no return there: the program does not fall back to its arm64 slice.
pub fn kernel_refuses(process: Arch, platform_binary: bool, preview_abi: bool) -> bool {
    process.ptrauth_version() == Some(0) && !platform_binary && !preview_abi
}

/// Is pointer authentication off in a process of slice `process`? xnu
/// kern_exec.c: `IMGPF_NOJOP` unless the slice is arm64e of the current
/// ABI (`arm64_cpusubtype_uses_ptrauth`), and an arm64e slice run so gets
/// the apple[] string `ptrauth_disabled=1` (`exec_add_apple_strings`);
/// dyld-1378 dyld/DyldProcessConfig.cpp, `Process::getMainArchs`: keys are
/// off for an arm64 main executable, or with `ptrauth_disabled=1`.
fn keys_off(process: Arch) -> bool {
    process == Arch::Arm64 || process.ptrauth_version().is_some_and(|v| v != 0)
}

/// dyld's rule: does a process of slice `process` find a slice it loads in
/// a library of `lib`? dyld-1378: the graded list is the one of dyld's own
/// architecture (dyld/DyldDelegates.cpp, `SyscallDelegate::getGradedArchs`
/// calls `GradedArchitectures::currentLoad` when building dyld), and
/// mach_o/GradedArchitectures.cpp gives, for the arm64e dyld of Apple
/// Silicon, `archs_arm64e` (arm64e only) with pointer authentication on and
/// `archs_arm64e_keysOff` (arm64e, arm64e.v1, arm64, arm64 V8) with it off;
/// for an x86_64 dyld `archs_mac` (x86_64; x86_64h first on a Haswell CPU,
/// `archs_macHaswell`). Slices compare whole subtypes for arm64
/// (mach_o/Architecture.cpp, `operator==`): an unversioned arm64e slice
/// loads nowhere.
pub fn loads_into(lib: &[Arch], process: Arch) -> bool {
    let has = |a: Arch| lib.contains(&a);
    match process {
        Arch::X86_64h => has(Arch::X86_64h) || has(Arch::X86_64),
        Arch::X86_64 => has(Arch::X86_64),
        p if keys_off(p) => {
            has(Arch::Arm64e) || has(Arch::Arm64eOther(SUBTYPE_ARM64E_V1)) || has(Arch::Arm64)
        }
        p if p.ptrauth_version().is_some() => has(Arch::Arm64e),
        p => has(p),
    }
}

/// How a process of slice `process` loads libraries: "arm64e" or "arm64e
/// (pointer authentication off)".
fn process_name(process: Arch) -> String {
    if process.ptrauth_version().is_some() && keys_off(process) {
        format!("{} with pointer authentication off", process.name())
    } else {
        process.name()
    }
}

/// Why dyld would kill a process of `program` with `lib` inserted, or None
/// when it loads (or the program does not run here at all: see
/// `process_arch` and `kernel_refuses`, which dyld never gets to).
pub fn would_kill(program: &[Arch], lib: &[Arch], host: Host) -> Option<String> {
    let process = process_arch(program, host)?;
    (!loads_into(lib, process)).then(|| {
        let only = if process.ptrauth_version().is_some() && !keys_off(process) {
            ", which loads only arm64e libraries,"
        } else {
            ""
        };
        format!(
            "it runs as {}{only} and the library has {}: dyld would refuse the library and kill the program",
            process_name(process),
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

fn name16(b: &[u8]) -> &[u8] {
    let b = &b[..b.len().min(16)];
    b.split(|&c| c == 0).next().unwrap_or(b)
}

/// dyld's restricted-program rule on one slice's header and load commands
/// (`slice` starts at its `mach_header`): does it have a section
/// `__restrict` in segment `__RESTRICT`? dyld-1378 mach_o/UnsafeHeader.cpp,
/// `UnsafeHeader::isRestricted` (`hasSection("__RESTRICT", "__restrict")`,
/// the segment name taken from the section, or from its segment command
/// when the section's is empty, `forEachSection`); dyld passes the answer
/// to AMFI as `AMFI_DYLD_INPUT_PROC_HAS_RESTRICT_SEG`
/// (dyld/DyldDelegates.cpp, `SyscallDelegate::amfiFlags`), which then
/// denies the `DYLD_*` path variables (DYLD_INSERT_LIBRARIES among them).
/// None: not a little-endian Mach-O header, or load commands that are
/// malformed or run past `slice` (dyld's `forEachLoadCommand` checks).
pub fn restricted(slice: &[u8]) -> Option<bool> {
    let (header, is64) = match le32(slice, 0)? {
        MH_MAGIC_64 => (32, true),
        MH_MAGIC => (28, false),
        _ => return None,
    };
    let ncmds = le32(slice, 16)? as usize;
    let end = header + le32(slice, 20)? as usize;
    let mut at = header;
    for _ in 0..ncmds {
        let (cmd, size) = (le32(slice, at)?, le32(slice, at + 4)? as usize);
        if size < 8 || at + size > end || at + size > slice.len() {
            return None;
        }
        let (lc_seg, seg_size, sect_size) = if is64 {
            (LC_SEGMENT_64, 72, 80)
        } else {
            (LC_SEGMENT, 56, 68)
        };
        if cmd == lc_seg {
            let segname = name16(slice.get(at + 8..at + 24)?);
            let nsects = le32(slice, at + seg_size - 8)? as usize;
            for i in 0..nsects {
                let s = at + seg_size + i * sect_size;
                let sect = slice.get(s..s + sect_size)?;
                let (sectname, mut seg) = (name16(&sect[..16]), name16(&sect[16..32]));
                // 32-bit: dyld uses the section's segment name only.
                if is64 && seg.is_empty() {
                    seg = segname;
                }
                if sectname == b"__restrict" && seg == b"__RESTRICT" {
                    return Some(true);
                }
            }
        }
        at += size;
    }
    Some(false)
}

/// The header and load commands of the slice of `arch` in the file at
/// `path` (the whole file's for a thin one), for `restricted`.
pub fn slice_load_commands(path: &std::path::Path, arch: Arch) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "no such Mach-O slice");
    let offset = slices(&head(path)?)
        .and_then(|s| s.into_iter().find(|s| s.arch == arch))
        .ok_or_else(bad)?
        .offset;
    let mut f = std::fs::File::open(path)?;
    f.seek(SeekFrom::Start(offset))?;
    let mut v = vec![0u8; 32];
    f.read_exact(&mut v)?;
    // sizeofcmds, bounded: a header is never near this big.
    let cmds = (le32(&v, 20).ok_or_else(bad)? as u64).min(16 << 20);
    (&mut f).take(cmds).read_to_end(&mut v)?;
    Ok(v)
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

    fn name16(s: &str) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..s.len()].copy_from_slice(s.as_bytes());
        b
    }

    /// A segment: its name and its sections, each (sectname, the segment
    /// name written in the section; "" leaves it empty).
    pub type Segment<'a> = (&'a str, &'a [(&'a str, &'a str)]);

    /// A 64-bit (or, `is64` false, 32-bit) MH_EXECUTE header with one
    /// segment command per `segs` entry, as loader.h lays them out.
    pub fn macho(cpu: u32, sub: u32, is64: bool, segs: &[Segment]) -> Vec<u8> {
        let (seg_size, sect_size) = if is64 { (72, 80) } else { (56, 68) };
        let mut cmds = Vec::new();
        for (segname, sects) in segs {
            let size = seg_size + sect_size * sects.len();
            let mut c = Vec::new();
            let cmd = if is64 { LC_SEGMENT_64 } else { LC_SEGMENT };
            c.extend_from_slice(&cmd.to_le_bytes());
            c.extend_from_slice(&(size as u32).to_le_bytes());
            c.extend_from_slice(&name16(segname));
            // vmaddr, vmsize, fileoff, filesize; maxprot, initprot: zero.
            c.resize(seg_size - 8, 0);
            c.extend_from_slice(&(sects.len() as u32).to_le_bytes());
            c.extend_from_slice(&0u32.to_le_bytes());
            for (sectname, seg) in sects.iter() {
                c.extend_from_slice(&name16(sectname));
                c.extend_from_slice(&name16(seg));
                c.resize(c.len() + sect_size - 32, 0);
            }
            assert_eq!(c.len(), size);
            cmds.push(c);
        }
        let mut v = Vec::new();
        let magic = if is64 { MH_MAGIC_64 } else { MH_MAGIC };
        let sizeofcmds: usize = cmds.iter().map(Vec::len).sum();
        for w in [magic, cpu, sub, 2, cmds.len() as u32, sizeofcmds as u32, 0] {
            v.extend_from_slice(&w.to_le_bytes());
        }
        if is64 {
            v.extend_from_slice(&0u32.to_le_bytes());
        }
        for c in cmds {
            v.extend(c);
        }
        v
    }

    /// A universal file holding `slices` (Mach-O files), each at a 16 KiB
    /// boundary, as `lipo -create` aligns arm64 slices.
    pub fn universal(slices: &[Vec<u8>]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&FAT_MAGIC.to_be_bytes());
        v.extend_from_slice(&(slices.len() as u32).to_be_bytes());
        let mut at = 0x4000u32;
        let mut placed = Vec::new();
        for s in slices {
            for w in [
                le32(s, 4).unwrap(),
                le32(s, 8).unwrap(),
                at,
                s.len() as u32,
                14,
            ] {
                v.extend_from_slice(&w.to_be_bytes());
            }
            placed.push(at);
            at += (s.len() as u32).div_ceil(0x4000) * 0x4000;
        }
        for (s, off) in slices.iter().zip(placed) {
            v.resize(off as usize, 0);
            v.extend_from_slice(s);
        }
        v
    }

    pub const CPU_ARM64: (u32, u32) = (CPU_TYPE_ARM64, 0);
    /// arm64e with the pointer-auth ABI bits set, as real binaries have.
    pub const CPU_ARM64E: (u32, u32) = (CPU_TYPE_ARM64, 0x8000_0002);
    pub const CPU_X86_64: (u32, u32) = (CPU_TYPE_X86_64, 3);
    /// The segment and section that make dyld treat a program as restricted.
    pub const RESTRICT: Segment = ("__RESTRICT", &[("__restrict", "__RESTRICT")]);
    pub const TEXT: Segment = ("__TEXT", &[("__text", "__TEXT"), ("__cstring", "__TEXT")]);
}

#[cfg(test)]
mod tests {
    use super::fake::*;
    use super::*;
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
    fn what_a_shell_wide_library_must_serve() {
        assert_eq!(unserved(&[Arm64, X86_64], Host::AppleSilicon), vec![Arm64e]);
        assert_eq!(unserved(&[Arm64], Host::AppleSilicon), vec![Arm64e, X86_64]);
        assert!(unserved(&[Arm64e, Arm64, X86_64], Host::AppleSilicon).is_empty());
        // arm64 processes load an arm64e slice (pointer authentication off).
        assert!(unserved(&[Arm64e, X86_64], Host::AppleSilicon).is_empty());
        assert!(unserved(&[Arm64, X86_64], Host::Intel).is_empty());
        assert_eq!(unserved(&[Arm64], Host::Intel), vec![X86_64h, X86_64]);
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
}
