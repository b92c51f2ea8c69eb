//! No page size is assumed: the library, the engine, the launcher and the
//! checks read it from the system (`sysconf(_SC_PAGESIZE)`, which glibc
//! answers from the auxiliary vector's `AT_PAGESZ`), because arm64 Linux
//! runs with 4, 16 and 64 KiB pages. This test greps their sources (not the
//! tests, nor the fake kernel, whose pages are a parameter) for the
//! spellings of 4 KiB and its mask; a number that is not a page size is
//! listed below with what it is.

use std::path::{Path, PathBuf};

/// 4 KiB, its mask and its shift, as literals.
const SPELLINGS: [&str; 9] = [
    "4096", "4095", "0x1000", "0xfff", "0xFFF", "<< 12", ">> 12", "4 << 10", "4 * 1024",
];

/// (file, text on the line): uses of those numbers that are not a page.
const NOT_A_PAGE: [(&str, &str); 23] = [
    ("core/src/config.rs", "DEFAULT_MAX_ENTRIES: usize = 4096"),
    // Descriptor numbers tracked one by one (above: shared counters).
    ("core/src/close_seq.rs", "SEQ_FDS: usize = 4096"),
    // getpwuid_r's string buffer.
    ("src/library/embedded.rs", "vec![0 as libc::c_char; 4096]"),
    ("core/src/table/mod.rs", "KEY_BUCKETS: usize = 4096"),
    ("core/src/table/mod.rs", "START_HINTS: usize = 4096"),
    ("core/src/readonly_fds.rs", "CACHED_FDS: usize = 4096"),
    // Descriptor numbers below which a range close marks every word.
    ("core/src/readonly_fds.rs", "RANGE_FLOOR: usize = 4096"),
    // The counters' alignment for a shared mapping of their own, per
    // architecture: x86_64 has one page size, 4 KiB (others: 16 KiB, and
    // larger pages keep the counters private).
    ("core/src/stats.rs", "IMAGE_BYTES: usize = 4096"),
    ("core/src/stats.rs", "repr(C, align(4096))"),
    // PATH_MAX-sized buffers.
    ("interpose/src/init.rs", "STATS_FILE: [u8; 4096]"),
    ("interpose/src/live.rs", "DIR: [u8; 4096]"),
    ("interpose/src/live.rs", "dir.len() + 48 > 4096"),
    ("interpose/src/live.rs", "path[len..4095]"),
    ("interpose/src/init.rs", "path.len() < 4096"),
    ("interpose/src/trace.rs", "name = [0u8; 4096]"),
    // The bit fields of glibc's makedev.
    ("core/src/maps_text.rs", "| ((major & 0xfff) << 8)"),
    ("core/src/maps_text.rs", "| ((minor & 0xffff_ff00) << 12)"),
    // A read buffer for /proc/self/maps.
    ("interpose/src/linux/maps.rs", "UnsafeCell<[u8; 4096]>"),
    ("interpose/src/linux/maps.rs", "UnsafeCell::new([0; 4096])"),
    // Mach-O header bytes read (the load commands' start).
    ("src/macho/parse.rs", "4096"),
    // The probe pattern's mixing of a position, and a xorshift step.
    ("check/src/sys.rs", "(pos >> 12)"),
    ("check/src/sys.rs", "self.0 >> 12"),
    // A raw system call's errors are -4095..-1 (the kernel's MAX_ERRNO).
    ("interpose/src/linux/sys.rs", "(-4095..0)"),
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Whether `rel` is test code or the fake kernel (its page is a field).
fn exempt_file(rel: &str) -> bool {
    rel.starts_with("core/src/fake/")
        || rel.contains("/tests/")
        || rel.ends_with("/tests.rs")
        || rel.ends_with("/fake.rs")
}

/// Whether `line` opens the unit tests that end a file (`#[cfg(test)]`,
/// `#[cfg(all(test, ...))]`, but not `not(test)`).
fn tests_start(line: &str) -> bool {
    let l = line.trim();
    l.starts_with("#[cfg(") && !l.contains("not(test)") && {
        let args = l.trim_start_matches("#[cfg(");
        args.starts_with("test)") || args.starts_with("all(test,")
    }
}

/// The lines of `text` before its unit tests, numbered from 1, comments
/// left out.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, l)| !tests_start(l))
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
}

#[test]
fn no_literal_page_size_outside_tests_and_the_fake_kernel() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "core/src",
        "interpose/src",
        "interpose/cdylib",
        "src",
        "check/src",
    ] {
        sources(&root.join(dir), &mut files);
    }
    files.push(root.join("build.rs"));
    files.push(root.join("interpose/cdylib_build.rs"));
    let mut found = Vec::new();
    let mut scanned = 0;
    for f in &files {
        let rel = f.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        if exempt_file(&rel) {
            continue;
        }
        scanned += 1;
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in code_lines(&text) {
            let hit = SPELLINGS.iter().any(|s| {
                line.match_indices(s).any(|(at, _)| {
                    // Whole numbers only (not 40960 or 0x10000), with or
                    // without a type suffix (4096usize).
                    let before = line[..at].chars().next_back();
                    let after = line[at + s.len()..].chars().next();
                    let hex = s.starts_with("0x");
                    !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                        && !after
                            .is_some_and(|c| c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()))
                })
            });
            let allowed = NOT_A_PAGE
                .iter()
                .any(|(file, text)| rel == *file && line.contains(text));
            if hit && !allowed {
                found.push(format!("{rel}:{n}: {}", line.trim()));
            }
        }
    }
    assert!(scanned > 50, "only {scanned} files scanned");
    assert!(
        found.is_empty(),
        "a literal 4 KiB page (read the page size from the system; if the number is not a page, add it to NOT_A_PAGE):\n{}",
        found.join("\n")
    );
    println!("page size literals: none in {scanned} source files");
}
