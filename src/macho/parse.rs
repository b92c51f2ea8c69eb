//! Reading Mach-O files: the slices of a thin or universal file, and one
//! slice's load commands (dyld's `__RESTRICT` rule).

use super::arch::Arch;

pub(super) const MH_MAGIC_64: u32 = 0xfeed_facf;
pub(super) const MH_MAGIC: u32 = 0xfeed_face;
pub(super) const FAT_MAGIC: u32 = 0xcafe_babe;
const FAT_MAGIC_64: u32 = 0xcafe_babf;
pub(super) const LC_SEGMENT: u32 = 0x1;
pub(super) const LC_SEGMENT_64: u32 = 0x19;

fn be32(d: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_be_bytes(d.get(off..off + 4)?.try_into().ok()?))
}

fn be64(d: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_be_bytes(d.get(off..off + 8)?.try_into().ok()?))
}

pub(super) fn le32(d: &[u8], off: usize) -> Option<u32> {
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
