//! What an ELF program's headers say about preloading into it: its dynamic
//! linker (PT_INTERP), the libraries it needs (DT_NEEDED), and whether it
//! carries an AddressSanitizer runtime. Read through `object` over a read
//! cache: only the headers and tables asked for are read, never the whole
//! file, since the launcher asks before every run.

use object::elf::{SectionType, DT_NEEDED, SHN_UNDEF, SHT_DYNSYM, SHT_SYMTAB};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, SectionTable, Sym};
use object::{elf, Endianness, FileKind, ReadCache};
use std::fs::File;
use std::path::Path;

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

type Data<'a> = &'a ReadCache<File>;

/// What is read of one ELF file, 32- or 64-bit.
trait Reader {
    fn has_program_headers(&self, data: Data) -> Option<bool>;
    fn interpreter(&self, data: Data) -> Option<Vec<u8>>;
    fn needed(&self, data: Data) -> Option<Vec<String>>;
    fn defines(&self, data: Data, kind: SectionType, name: &[u8]) -> Option<bool>;
    fn little_endian(&self) -> bool;
}

impl<H: FileHeader<Endian = Endianness>> Reader for H {
    fn has_program_headers(&self, data: Data) -> Option<bool> {
        let endian = self.endian().ok()?;
        Some(!self.program_headers(endian, data).ok()?.is_empty())
    }

    fn interpreter(&self, data: Data) -> Option<Vec<u8>> {
        let endian = self.endian().ok()?;
        let headers = self.program_headers(endian, data).ok()?;
        headers
            .iter()
            .find_map(|p| p.interpreter(endian, data).ok().flatten())
            .map(<[u8]>::to_vec)
    }

    fn needed(&self, data: Data) -> Option<Vec<String>> {
        let endian = self.endian().ok()?;
        let table = self
            .sections(endian, data)
            .ok()?
            .dynamic_table(endian, data);
        let table = table.ok()?;
        table
            .iter()
            .filter(|d| d.tag == DT_NEEDED)
            .map(|d| Some(String::from_utf8_lossy(table.string(d).ok()?).into_owned()))
            .collect()
    }

    fn little_endian(&self) -> bool {
        self.is_little_endian()
    }

    fn defines(&self, data: Data, kind: SectionType, name: &[u8]) -> Option<bool> {
        let endian = self.endian().ok()?;
        let sections: SectionTable<H, Data> = self.sections(endian, data).ok()?;
        let (_, table) = sections
            .enumerate()
            .find(|(_, s)| s.sh_type(endian) == kind)?;
        let strings = sections
            .section(table.link(endian))
            .ok()?
            .data(endian, data)
            .ok()?;
        // Most programs do not even have the name: one scan of the strings.
        let needle = [b"\0", name, b"\0"].concat();
        if !strings.windows(needle.len()).any(|w| w == needle) {
            return Some(false);
        }
        let symbols = sections.symbols(endian, data, kind).ok()?;
        Some(symbols.symbols().iter().any(|s| {
            s.st_shndx(endian) != SHN_UNDEF
                && s.name(endian, symbols.strings()).is_ok_and(|n| n == name)
        }))
    }
}

/// Reads a little-endian ELF file at `path` with `read`; None for anything
/// else or a file `object` finds malformed.
fn read<T>(path: &Path, read: impl FnOnce(&dyn Reader, Data) -> Option<T>) -> Option<T> {
    let cache = ReadCache::new(File::open(path).ok()?);
    let data = &cache;
    let elf: &dyn Reader = match FileKind::parse(data).ok()? {
        FileKind::Elf32 => elf::FileHeader32::<Endianness>::parse(data).ok()?,
        FileKind::Elf64 => elf::FileHeader64::<Endianness>::parse(data).ok()?,
        _ => return None,
    };
    // The launcher and its library are little-endian only.
    if !elf.little_endian() {
        return None;
    }
    read(elf, data)
}

/// Whether the kernel can load the file as an ELF program: an executable
/// or a shared object (`e_type`), for this machine or one a binfmt_misc
/// handler takes, its program headers read whole. Linux answers ENOEXEC
/// for anything else (fs/binfmt_elf.c `load_elf_binary`,
/// `load_elf_phdrs`), and execvp then runs the file with /bin/sh, as for
/// any file it refuses.
pub fn loadable(path: &Path) -> bool {
    let kind_ok = header(path).is_some_and(|h| {
        matches!(h.e_type, ET_EXEC | ET_DYN) && (h.kernel_runs() || emulated(path))
    });
    kind_ok && read(path, |elf, data| elf.has_program_headers(data)).unwrap_or(false)
}

// The header's values read here (elf.h).
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const ELFCLASS32: u8 = 1;
const ELFCLASS64: u8 = 2;
const ELFDATA2LSB: u8 = 1;
const EM_386: u16 = 3;
const EM_ARM: u16 = 40;
const EM_X86_64: u16 = 62;
const EM_AARCH64: u16 = 183;

/// The fields of an ELF header that say what runs it.
pub struct Header {
    /// `ELFCLASS32` or `ELFCLASS64`.
    pub class: u8,
    pub e_type: u16,
    pub machine: u16,
}

impl Header {
    /// A program for the machine and word size this launcher (and its
    /// library) is built for.
    pub fn native(&self) -> bool {
        let class = if cfg!(target_pointer_width = "64") {
            ELFCLASS64
        } else {
            ELFCLASS32
        };
        let machine = if cfg!(target_arch = "x86_64") {
            EM_X86_64
        } else if cfg!(target_arch = "aarch64") {
            EM_AARCH64
        } else {
            self.machine
        };
        self.class == class && self.machine == machine
    }

    /// A shared object (`ET_DYN`): a library, a PIE or static-pie program.
    pub fn shared_object(&self) -> bool {
        self.e_type == ET_DYN
    }

    /// Whether the kernel runs it itself: its own machine, or the 32-bit
    /// one it runs beside it (x86_64 runs i386, arm64 32-bit ARM). The
    /// kernel's machine is `kernel.arch` (which qemu-user, running this
    /// launcher for another machine, does not change), else this build's.
    pub fn kernel_runs(&self) -> bool {
        let arch = std::fs::read_to_string("/proc/sys/kernel/arch").unwrap_or_default();
        let kernel = match arch.trim() {
            "x86_64" => EM_X86_64,
            "aarch64" => EM_AARCH64,
            _ if cfg!(target_arch = "x86_64") => EM_X86_64,
            _ if cfg!(target_arch = "aarch64") => EM_AARCH64,
            _ => return true,
        };
        let compat = match kernel {
            EM_X86_64 => EM_386,
            _ => EM_ARM,
        };
        self.machine == kernel || self.machine == compat
    }

    /// A program only an emulator runs, for another machine than the
    /// library's: that machine's dynamic linker cannot load it. One the
    /// kernel runs itself is judged as before (its dynamic linker's name).
    pub fn foreign(&self) -> bool {
        !self.native() && !self.kernel_runs()
    }

    /// The machine, as a user would name it.
    pub fn machine_name(&self) -> String {
        match (self.machine, self.class) {
            (EM_X86_64, _) => "x86_64".into(),
            (EM_AARCH64, _) => "arm64".into(),
            (EM_386, _) => "i386".into(),
            (EM_ARM, _) => "32-bit ARM".into(),
            (m, ELFCLASS32) => format!("machine {m} (32-bit)"),
            (m, _) => format!("machine {m}"),
        }
    }
}

/// The header of a little-endian ELF file (the only kind this launcher
/// runs on).
pub fn header(path: &Path) -> Option<Header> {
    use std::io::Read;
    let mut h = [0u8; 20];
    File::open(path).ok()?.read_exact(&mut h).ok()?;
    (h.starts_with(b"\x7fELF") && h[5] == ELFDATA2LSB).then(|| Header {
        class: h[4],
        e_type: u16::from_le_bytes([h[16], h[17]]),
        machine: u16::from_le_bytes([h[18], h[19]]),
    })
}

/// Whether an enabled binfmt_misc handler takes the file by its magic
/// (qemu-user for another machine's programs, say): the kernel runs such a
/// program through it (fs/binfmt_misc.c `check_file`: the bytes at the
/// entry's offset, masked, equal its magic).
fn emulated(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::new();
    let read = File::open(path).and_then(|f| f.take(256).read_to_end(&mut head));
    if read.is_err() {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc/sys/fs/binfmt_misc") else {
        return false;
    };
    entries.flatten().any(|e| {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
        };
        let hex = |h: &str| -> Option<Vec<u8>> {
            (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
                .collect()
        };
        let (Some(magic), Some(offset)) = (
            field("magic ").and_then(hex),
            field("offset ").and_then(|o| o.parse::<usize>().ok()),
        ) else {
            return false;
        };
        let mask = field("mask ")
            .and_then(hex)
            .unwrap_or(vec![0xff; magic.len()]);
        text.starts_with("enabled")
            && head.len() >= offset + magic.len()
            && magic
                .iter()
                .zip(&mask)
                .zip(&head[offset..])
                .all(|((m, k), b)| b & k == m & k)
    })
}

/// The program interpreter (PT_INTERP); None for a static program or a
/// file that is not a little-endian ELF file.
pub fn interpreter(path: &Path) -> Option<String> {
    let s = read(path, |elf, data| elf.interpreter(data))?;
    Some(String::from_utf8_lossy(&s).into_owned())
}

/// Whether the dynamic linker `interp` (a program's PT_INTERP) is there
/// for the exec to load. Under qemu-user the emulator finds it below
/// `QEMU_LD_PREFIX` first, where a `stat` of the name alone does not look.
pub fn linker_exists(interp: &str) -> bool {
    Path::new(interp).exists()
        || std::env::var_os("QEMU_LD_PREFIX").is_some_and(|prefix| {
            let mut p = std::path::PathBuf::from(prefix);
            p.push(interp.trim_start_matches('/'));
            p.exists()
        })
}

/// The DT_NEEDED libraries, in order.
pub fn needed(path: &Path) -> Vec<String> {
    read(path, |elf, data| elf.needed(data)).unwrap_or_default()
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
    read(path, |elf, data| {
        Some(
            [SHT_DYNSYM, SHT_SYMTAB]
                .into_iter()
                .any(|kind| elf.defines(data, kind, b"__asan_init") == Some(true)),
        )
    })?
    .then_some(Asan::Static)
}

/// Whether the ELF file at `path` exports a definition of every one of
/// `names` (its dynamic symbol table).
pub fn exports_all(path: &Path, names: &[&[u8]]) -> bool {
    read(path, |elf, data| {
        Some(
            names
                .iter()
                .all(|n| elf.defines(data, SHT_DYNSYM, n) == Some(true)),
        )
    })
    .unwrap_or(false)
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
