//! Reading Mach-O files through `object`: the slices of a thin or
//! universal file, and one slice's load commands (dyld's `__RESTRICT`
//! rule).

use super::arch::Arch;
use object::macho::{FatArch32, FatArch64, MachHeader32, MachHeader64};
use object::read::macho::{FatArch, MachHeader, MachOFatFile, Section as _, Segment};
use object::{Endianness, FileKind};

// The magic numbers as a little-endian read of the first word gives them.
use object::macho::{MH_MAGIC, MH_MAGIC_64};

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

fn fat_slices<F: FatArch>(head: &[u8]) -> Option<Vec<Slice>> {
    let fat = MachOFatFile::<F>::parse(head).ok()?;
    // Java class files share 0xcafebabe; their "count" is a version >= 45.
    if fat.arches().is_empty() || fat.arches().len() > 32 {
        return None;
    }
    let slice = |a: &F| Slice {
        arch: Arch::from_cpu(a.cputype().0, a.cpusubtype().0),
        offset: a.offset().into(),
    };
    Some(fat.arches().iter().map(slice).collect())
}

fn thin_slice<M: MachHeader>(head: &[u8]) -> Option<Vec<Slice>> {
    let h = M::parse(head, 0).ok()?;
    let endian = h.endian().ok()?;
    let arch = Arch::from_cpu(h.cputype(endian).0, h.cpusubtype(endian).0);
    Some(vec![Slice { arch, offset: 0 }])
}

/// The slices of a Mach-O file (thin or universal) from its first bytes
/// (4 KiB are plenty), or None if it is not a Mach-O file.
pub fn slices(head: &[u8]) -> Option<Vec<Slice>> {
    match FileKind::parse(head).ok()? {
        FileKind::MachOFat32 => fat_slices::<FatArch32>(head),
        FileKind::MachOFat64 => fat_slices::<FatArch64>(head),
        FileKind::MachO32 => thin_slice::<MachHeader32<Endianness>>(head),
        FileKind::MachO64 => thin_slice::<MachHeader64<Endianness>>(head),
        _ => None,
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

fn name16(b: &[u8; 16]) -> &[u8] {
    b.split(|&c| c == 0).next().unwrap_or(b)
}

/// Does one slice (header at 0) have the section? None when `object`
/// finds its header or load commands malformed.
fn has_restrict_section<M: MachHeader<Endian = Endianness>>(slice: &[u8]) -> Option<bool> {
    let h = M::parse(slice, 0).ok()?;
    let endian = h.endian().ok()?;
    let mut commands = h.load_commands(endian, slice, 0).ok()?;
    while let Some(c) = commands.next().ok()? {
        let Some((segment, data)) = M::Segment::from_command(c).ok()? else {
            continue;
        };
        for sect in segment.sections(endian, data).ok()? {
            let (sectname, mut seg) = (name16(sect.sectname()), name16(sect.segname()));
            // 32-bit: dyld uses the section's segment name only.
            if h.is_type_64() && seg.is_empty() {
                seg = name16(segment.segname());
            }
            if sectname == b"__restrict" && seg == b"__RESTRICT" {
                return Some(true);
            }
        }
    }
    Some(false)
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
/// malformed or run past `slice` or the header's `sizeofcmds`.
pub fn restricted(slice: &[u8]) -> Option<bool> {
    match le32(slice, 0)? {
        MH_MAGIC_64 => has_restrict_section::<MachHeader64<Endianness>>(slice),
        MH_MAGIC => has_restrict_section::<MachHeader32<Endianness>>(slice),
        _ => None,
    }
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
