//! Fake Mach-O files for the tests: headers, load commands, universal
//! files.

use super::arch::{CPU_TYPE_ARM64, CPU_TYPE_X86_64};
use super::parse::le32;
use object::macho::{FAT_MAGIC, LC_SEGMENT, LC_SEGMENT_64, MH_MAGIC, MH_MAGIC_64};

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
        c.extend_from_slice(&cmd.0.to_le_bytes());
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
