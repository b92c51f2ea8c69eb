//! Linux's `/proc/self/maps` as text: one line per mapping,
//! `start-end perms offset major:minor inode path` (`fs/proc/task_mmu.c`,
//! `show_map_vma`), read in pieces that may end anywhere in a line.

use crate::config::parse_uint;
use crate::os::Region;

/// The most of a line kept across a piece's end: the fields up to the
/// inode take at most 86 bytes (16 hex digits per address and offset,
/// 3 and 5 for the device numbers, 20 decimal for the inode); the path
/// after them is not needed.
const HEAD: usize = 128;

/// The start of a line whose end is in a later piece.
pub struct Lines {
    head: [u8; HEAD],
    held: usize,
}

impl Default for Lines {
    fn default() -> Self {
        Self::new()
    }
}

impl Lines {
    pub const fn new() -> Self {
        Lines {
            head: [0; HEAD],
            held: 0,
        }
    }

    /// Hands `f` the mapping of each line that ends in `text` (the next
    /// piece read). False if a line is not one of `maps`'s.
    pub fn feed(&mut self, mut text: &[u8], mut f: impl FnMut(Region)) -> bool {
        while let Some(i) = text.iter().position(|&c| c == b'\n') {
            let region = if self.held == 0 {
                region(&text[..i])
            } else {
                self.hold(&text[..i]);
                let held = core::mem::take(&mut self.held);
                region(&self.head[..held])
            };
            let Some(r) = region else {
                return false;
            };
            f(r);
            text = &text[i + 1..];
        }
        self.hold(text);
        true
    }

    /// Whether the text ended at a line's end.
    pub fn ended(&self) -> bool {
        self.held == 0
    }

    fn hold(&mut self, part: &[u8]) {
        let n = part.len().min(HEAD - self.held);
        self.head[self.held..self.held + n].copy_from_slice(&part[..n]);
        self.held += n;
    }
}

/// The mapping one line describes.
pub fn region(line: &[u8]) -> Option<Region> {
    let mut fields = line.split(|&c| c == b' ').filter(|f| !f.is_empty());
    let (range, perms, off) = (fields.next()?, fields.next()?, fields.next()?);
    let (dev, ino) = (fields.next()?, fields.next()?);
    let dash = range.iter().position(|&c| c == b'-')?;
    let colon = dev.iter().position(|&c| c == b':')?;
    let (major, minor) = (hex(&dev[..colon])?, hex(&dev[colon + 1..])?);
    Some(Region {
        start: usize::try_from(hex(&range[..dash])?).ok()?,
        end: usize::try_from(hex(&range[dash + 1..])?).ok()?,
        off: hex(off)?,
        ino: parse_uint(ino)?,
        dev: makedev(major, minor),
        private: *perms.get(3)? == b'p',
        prot: [b'r', b'w', b'x']
            .iter()
            .zip([libc::PROT_READ, libc::PROT_WRITE, libc::PROT_EXEC])
            .filter(|&(c, _)| perms.contains(c))
            .fold(0, |p, (_, bit)| p | bit),
    })
}

/// A device number as glibc's `makedev` makes it on Linux, the way `stat`'s
/// device is told (`libc::makedev` is another function on macOS, where
/// this text is never read).
fn makedev(major: u64, minor: u64) -> u64 {
    ((major & 0xffff_f000) << 32)
        | ((major & 0xfff) << 8)
        | ((minor & 0xffff_ff00) << 12)
        | (minor & 0xff)
}

fn hex(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 16 {
        return None;
    }
    v.iter().try_fold(0u64, |n, &c| {
        let d = (c as char).to_digit(16)?;
        Some(n << 4 | d as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    const TEXT: &[u8] = b"\
55d0c8a00000-55d0c8a02000 r--p 00000000 fe:00 5308476                    /usr/bin/cat
7f1842850000-7f1842851000 r--s 00004000 fe:00 10010635                   /tmp/a file with  spaces
7f1842851000-7f1842853000 rw-p 00000000 00:00 0 \n\
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";

    fn all(pieces: &[&[u8]]) -> Option<Vec<Region>> {
        let mut lines = Lines::new();
        let mut v = Vec::new();
        for p in pieces {
            if !lines.feed(p, |r| v.push(r)) {
                return None;
            }
        }
        lines.ended().then_some(v)
    }

    #[test]
    fn reads_each_field_of_each_line() {
        let v = all(&[TEXT]).unwrap();
        assert_eq!(v.len(), 4);
        assert_eq!(
            v[1],
            Region {
                start: 0x7f18_4285_0000,
                end: 0x7f18_4285_1000,
                off: 0x4000,
                ino: 10010635,
                dev: makedev(0xfe, 0),
                private: false,
                prot: libc::PROT_READ,
            }
        );
        assert!(v[0].private && v[2].private && v[2].ino == 0);
        assert_eq!(v[2].prot, libc::PROT_READ | libc::PROT_WRITE);
        assert_eq!(v[3].prot, libc::PROT_EXEC);
        assert_eq!(v[3].end, 0xffff_ffff_ff60_1000);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn device_numbers_are_the_c_librarys() {
        for (major, minor) in [
            (0, 0),
            (8, 1),
            (0xfe, 0),
            (0x1234, 0x12_3456),
            (0xfff, 0xff),
        ] {
            assert_eq!(
                makedev(u64::from(major), u64::from(minor)),
                libc::makedev(major, minor)
            );
        }
    }

    #[test]
    fn pieces_may_end_anywhere() {
        let whole = all(&[TEXT]).unwrap();
        for cut in 0..TEXT.len() {
            for cut2 in cut..TEXT.len() {
                let v = all(&[&TEXT[..cut], &TEXT[cut..cut2], &TEXT[cut2..]]);
                assert_eq!(v.as_ref(), Some(&whole), "cut at {cut} and {cut2}");
            }
        }
    }

    #[test]
    fn a_long_path_is_cut_and_a_strange_line_refused() {
        let mut line = b"1000-2000 r--p 00001000 08:01 42 /".to_vec();
        line.extend(core::iter::repeat_n(b'x', 5000));
        line.push(b'\n');
        let v = all(&[&line[..100], &line[100..4096], &line[4096..]]).unwrap();
        assert_eq!(v[0].off, 0x1000);
        assert_eq!(v[0].ino, 42);
        assert_eq!(v[0].dev, makedev(8, 1));
        assert!(all(&[b"1000-2000 r--p\n"]).is_none());
        assert!(all(&[b"1000+2000 r--p 0 08:01 42\n"]).is_none());
        assert!(all(&[b"1000-2000 r--p 0 0801 42\n"]).is_none());
        assert!(all(&[b"1000-2000 r--p 0 08:01 42"]).is_none(), "no end");
    }
}
