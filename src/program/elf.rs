//! What an ELF program's headers say about preloading into it: its dynamic
//! linker (PT_INTERP), the libraries it needs (DT_NEEDED), and whether it
//! carries an AddressSanitizer runtime. Read with a few positioned reads,
//! never the whole file: the launcher asks before every run.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

const PT_INTERP: u64 = 3;
const SHT_SYMTAB: u64 = 2;
const SHT_DYNAMIC: u64 = 6;
const SHT_DYNSYM: u64 = 11;
const DT_NEEDED: u64 = 1;
/// Larger tables than this are not read (no real program has them).
const MAX_TABLE: u64 = 256 << 20;

/// How a program carries AddressSanitizer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Asan {
    /// Linked against the shared runtime (gcc's default): `libasan.so.N`.
    /// That runtime aborts the program unless it comes first in the
    /// library list, so any LD_PRELOAD stops it.
    Shared(String),
    /// The runtime is linked into the program (clang's default, gcc's
    /// `-static-libasan`): it has no such check.
    Static,
}

/// A little-endian ELF file, 32- or 64-bit.
struct Elf {
    file: File,
    is64: bool,
}

impl Elf {
    fn open(path: &Path) -> Option<Elf> {
        let file = File::open(path).ok()?;
        let mut ident = [0u8; 6];
        file.read_exact_at(&mut ident, 0).ok()?;
        // Magic, and little-endian data (ident[5] == 1).
        if &ident[..4] != b"\x7fELF" || ident[5] != 1 {
            return None;
        }
        Some(Elf {
            file,
            is64: ident[4] == 2,
        })
    }

    fn bytes(&self, off: u64, len: u64) -> Option<Vec<u8>> {
        if len > MAX_TABLE {
            return None;
        }
        let mut v = vec![0u8; len as usize];
        self.file.read_exact_at(&mut v, off).ok()?;
        Some(v)
    }

    /// A 64-bit field when the file is 64-bit, else a 32-bit one.
    fn word(&self, b: &[u8], off64: usize, off32: usize) -> Option<u64> {
        if self.is64 {
            le(b, off64, 8)
        } else {
            le(b, off32, 4)
        }
    }

    /// Where the ELF header says a header table is: (offset, entry size,
    /// entry count), from its fields at `fields` (each at (64-bit, 32-bit)
    /// offsets; the first a word, the others 16-bit).
    fn table_at(&self, fields: [(usize, usize); 3]) -> Option<(u64, u64, u64)> {
        let h = self.bytes(0, 64)?;
        let half =
            |(off64, off32): (usize, usize)| le(&h, if self.is64 { off64 } else { off32 }, 2);
        let [off, entsize, num] = fields;
        Some((self.word(&h, off.0, off.1)?, half(entsize)?, half(num)?))
    }

    /// The `num` entries of `entsize` bytes at `off`, each read by `entry`.
    fn entries<T>(
        &self,
        (off, entsize, num): (u64, u64, u64),
        entry: impl Fn(&[u8]) -> Option<T>,
    ) -> Option<Vec<T>> {
        let table = self.bytes(off, entsize * num)?;
        (0..num as usize)
            .map(|i| entry(table.get(i * entsize as usize..)?))
            .collect()
    }

    /// (type, offset, size) of every program header.
    fn segments(&self) -> Option<Vec<(u64, u64, u64)>> {
        let table = self.table_at([(0x20, 0x1c), (0x36, 0x2a), (0x38, 0x2c)])?;
        self.entries(table, |p| {
            Some((le(p, 0, 4)?, self.word(p, 8, 4)?, self.word(p, 32, 16)?))
        })
    }

    /// (type, offset, size, link, entry size) of every section header.
    fn sections(&self) -> Option<Vec<[u64; 5]>> {
        let table = self.table_at([(0x28, 0x20), (0x3a, 0x2e), (0x3c, 0x30)])?;
        if table.0 == 0 || table.2 == 0 {
            return Some(Vec::new());
        }
        self.entries(table, |s| {
            Some([
                le(s, 4, 4)?,
                self.word(s, 0x18, 0x10)?,
                self.word(s, 0x20, 0x14)?,
                le(s, if self.is64 { 0x28 } else { 0x18 }, 4)?,
                self.word(s, 0x38, 0x24)?,
            ])
        })
    }

    /// The string table section `index` names.
    fn strings(&self, sections: &[[u64; 5]], index: u64) -> Option<Vec<u8>> {
        let s = sections.get(index as usize)?;
        self.bytes(s[1], s[2])
    }
}

fn le(b: &[u8], off: usize, n: usize) -> Option<u64> {
    let b = b.get(off..off + n)?;
    Some(b.iter().rev().fold(0u64, |v, &x| (v << 8) | x as u64))
}

fn c_string(table: &[u8], off: u64) -> Option<&[u8]> {
    let rest = table.get(off as usize..)?;
    Some(&rest[..rest.iter().position(|&c| c == 0)?])
}

/// The program interpreter (PT_INTERP); None for a static program or a
/// file that is not a little-endian ELF file.
pub fn interpreter(path: &Path) -> Option<String> {
    let elf = Elf::open(path)?;
    let (_, off, size) = elf.segments()?.into_iter().find(|s| s.0 == PT_INTERP)?;
    let s = elf.bytes(off, size)?;
    Some(
        String::from_utf8_lossy(&s)
            .trim_end_matches('\0')
            .to_string(),
    )
}

/// The DT_NEEDED libraries, in order.
pub fn needed(path: &Path) -> Vec<String> {
    let read = || -> Option<Vec<String>> {
        let elf = Elf::open(path)?;
        let sections = elf.sections()?;
        let dynamic = sections.iter().find(|s| s[0] == SHT_DYNAMIC)?;
        let strings = elf.strings(&sections, dynamic[3])?;
        let table = elf.bytes(dynamic[1], dynamic[2])?;
        let entry = if elf.is64 { 16 } else { 8 };
        let mut out = Vec::new();
        for e in table.chunks_exact(entry) {
            let tag = elf.word(e, 0, 0)?;
            if tag == 0 {
                break;
            }
            if tag == DT_NEEDED {
                let name = c_string(&strings, elf.word(e, 8, 4)?)?;
                out.push(String::from_utf8_lossy(name).into_owned());
            }
        }
        Some(out)
    };
    read().unwrap_or_default()
}

/// Whether a symbol table of the given type defines `name`.
fn defines(elf: &Elf, sections: &[[u64; 5]], kind: u64, name: &[u8]) -> bool {
    let find = || -> Option<bool> {
        let table = sections.iter().find(|s| s[0] == kind)?;
        let strings = elf.strings(sections, table[3])?;
        // Most programs do not even have the name: one scan of the strings.
        let needle = [b"\0", name, b"\0"].concat();
        if !strings.windows(needle.len()).any(|w| w == needle) {
            return Some(false);
        }
        let symbols = elf.bytes(table[1], table[2])?;
        let size = if elf.is64 { 24 } else { 16 };
        Some(symbols.chunks_exact(size).any(|s| {
            let shndx = if elf.is64 { le(s, 6, 2) } else { le(s, 14, 2) };
            le(s, 0, 4)
                .and_then(|n| c_string(&strings, n))
                .is_some_and(|n| n == name)
                && shndx.is_some_and(|i| i != 0)
        }))
    };
    find().unwrap_or(false)
}

/// The shared ASan runtime the program needs, if any: cheap (the dynamic
/// section only), for the launcher's check before every run.
pub fn shared_asan(path: &Path) -> Option<String> {
    needed(path)
        .into_iter()
        .find(|n| n.starts_with("libasan.so"))
}

/// How the program carries AddressSanitizer, if it does: a shared runtime
/// it needs, or `__asan_init` defined in its dynamic symbol table (clang)
/// or, when not stripped, its full one (gcc's `-static-libasan`).
pub fn asan(path: &Path) -> Option<Asan> {
    if let Some(lib) = shared_asan(path) {
        return Some(Asan::Shared(lib));
    }
    let elf = Elf::open(path)?;
    let sections = elf.sections()?;
    [SHT_DYNSYM, SHT_SYMTAB]
        .into_iter()
        .any(|kind| defines(&elf, &sections, kind, b"__asan_init"))
        .then_some(Asan::Static)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn reads_this_test_binary() {
        let me = std::env::current_exe().unwrap();
        assert!(interpreter(&me).unwrap().contains("ld-"));
        assert!(needed(&me).iter().any(|n| n.starts_with("libc.so")));
        assert_eq!(asan(&me), None);
        assert_eq!(interpreter(Path::new("/nonexistent")), None);
        assert!(needed(Path::new("/etc/hostname")).is_empty());
    }
}
