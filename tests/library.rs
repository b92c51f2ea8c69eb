//! libmunmapq is loaded into every process a shell starts (`munmapq preload-env`),
//! so it must stay small and cheap to load: no standard library in it, the
//! mapping table in `.bss` (zero-filled on demand, no file bytes), and no
//! symbol that could capture a program's own (it exports its hooks, nothing
//! else). Read straight from the ELF file the tests preload.
#![cfg(target_os = "linux")]

mod common;
use common::*;

struct Elf(Vec<u8>);

struct Section {
    name: String,
    kind: usize,
    offset: usize,
    size: usize,
    link: usize,
}

impl Elf {
    fn u16(&self, at: usize) -> usize {
        u16::from_le_bytes(self.0[at..at + 2].try_into().unwrap()) as usize
    }
    fn u32(&self, at: usize) -> usize {
        u32::from_le_bytes(self.0[at..at + 4].try_into().unwrap()) as usize
    }
    fn u64(&self, at: usize) -> usize {
        u64::from_le_bytes(self.0[at..at + 8].try_into().unwrap()) as usize
    }
    fn cstr(&self, at: usize) -> String {
        let end = self.0[at..].iter().position(|&b| b == 0).unwrap();
        String::from_utf8_lossy(&self.0[at..at + end]).into_owned()
    }

    /// Section headers of a 64-bit little-endian ELF file.
    fn sections(&self) -> Vec<Section> {
        assert_eq!(&self.0[..6], b"\x7fELF\x02\x01", "a 64-bit LE ELF file");
        let (off, size, n) = (self.u64(0x28), self.u16(0x3a), self.u16(0x3c));
        let header = |i: usize| off + i * size;
        let names = self.u64(header(self.u16(0x3e)) + 0x18);
        (0..n)
            .map(|i| {
                let h = header(i);
                Section {
                    name: self.cstr(names + self.u32(h)),
                    kind: self.u32(h + 4),
                    offset: self.u64(h + 0x18),
                    size: self.u64(h + 0x20),
                    link: self.u32(h + 0x28),
                }
            })
            .collect()
    }

    /// Dynamic symbols: (name, defined here, global).
    fn dynamic_symbols(&self) -> Vec<(String, bool, bool)> {
        let sections = self.sections();
        let dynsym = sections.iter().find(|s| s.kind == 11).expect(".dynsym");
        let strings = &sections[dynsym.link];
        (dynsym.offset..dynsym.offset + dynsym.size)
            .step_by(24)
            .skip(1)
            .map(|e| {
                let binding = self.0[e + 4] >> 4;
                (
                    self.cstr(strings.offset + self.u32(e)),
                    self.u16(e + 6) != 0,
                    binding == 1,
                )
            })
            .collect()
    }
}

#[test]
fn the_library_is_small_and_exports_only_its_hooks() {
    let elf = Elf(std::fs::read(lib()).unwrap());
    let size_of = |name: &str| {
        elf.sections()
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.size)
            .sum::<usize>()
    };
    let (data, bss, text) = (size_of(".data"), size_of(".bss"), size_of(".text"));
    println!("libmunmapq (debug build): .text {text} B, .data {data} B, .bss {bss} B");
    assert!(bss > 1 << 20, "the mapping table belongs in .bss ({bss} B)");
    assert!(
        data < 4096,
        ".data holds {data} B: a static with non-zero bytes?"
    );

    let symbols = elf.dynamic_symbols();
    let mut exported: Vec<&str> = symbols
        .iter()
        .filter(|(_, defined, global)| *defined && *global)
        .map(|(n, _, _)| n.as_str())
        .collect();
    exported.sort_unstable();
    assert_eq!(
        exported,
        [
            "_Fork",
            "_IO_fclose",
            "__clone",
            "__close",
            "__dup2",
            "__vfork",
            "clone",
            "close",
            "close_range",
            "closefrom",
            "dup2",
            "dup3",
            "fclose",
            "madvise",
            "mbind",
            "mincore",
            "mlock",
            "mlock2",
            "mlockall",
            "mmap",
            "mmap64",
            "mount",
            "mount_setattr",
            "mprotect",
            "mremap",
            "mseal",
            "msync",
            "munlock",
            "munlockall",
            "munmap",
            "personality",
            "pkey_mprotect",
            "posix_madvise",
            "prctl",
            "prlimit",
            "prlimit64",
            "process_madvise",
            "remove",
            "rename",
            "renameat",
            "renameat2",
            "setrlimit",
            "setrlimit64",
            "shm_unlink",
            "shmat",
            "syscall",
            "umount",
            "umount2",
            "unlink",
            "unlinkat",
            "unshare",
            "vfork"
        ]
    );
    for (name, defined, _) in &symbols {
        assert!(
            *defined || !(name.starts_with("_Unwind") || name.starts_with("rust_")),
            "{name} is needed from outside: std or an unwinder crept in"
        );
    }
}
