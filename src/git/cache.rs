//! The git wrapper's cache: one small text file per repository (and per
//! set of configuration variables) in `$XDG_CACHE_HOME/munmapq/git/`
//! (absolute only, else `~/.cache/munmapq/git/`), holding what git's
//! configuration and packs said and the identity of every file that said
//! it. It only ever switches the preload on or off; the library's path is
//! not in it. Without a usable cache directory every git asks git again.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const MAGIC: &str = "munmapq git decision 3";
/// A file changed this recently may change again within the same mtime
/// tick, unseen: such an answer is not cached.
const RACY: Duration = Duration::from_secs(1);

/// The variables that change which configuration git reads.
const ENV: [&str; 8] = [
    "HOME",
    "XDG_CONFIG_HOME",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_DIR",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
];

/// What git's configuration and packs say here (the cached part).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settled {
    /// `munmapq.enable`, and where it is set.
    pub enable: Option<(bool, String)>,
    /// The settings that make git thrash its windows, named.
    pub thrash: Option<String>,
    /// Why git could not tell (then munmapq stays out).
    pub error: Option<String>,
    /// `munmapq.enable` set to something that is not a boolean, and where:
    /// taken as unset, and said.
    pub bad_enable: Option<String>,
}

pub fn dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".cache"))
        })?;
    Some(base.join("munmapq").join("git"))
}

/// FNV-1a, 64 bits: a file name for the key.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

/// `bytes` as printable ASCII, every other byte (space, backslash, a
/// newline, one that is not UTF-8) as `\xHH`: two paths never share an
/// escape, and one is read back byte for byte.
fn escape(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_graphic() && b != b'\\' {
            s.push(b as char);
        } else {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

/// A path [`escape`] wrote.
fn unescape(s: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let mut out = Vec::with_capacity(s.len());
    let mut rest = s.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'\\' {
            let hex = std::str::from_utf8(tail.get(1..3)?).ok()?;
            (tail.first() == Some(&b'x')).then_some(())?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[3..];
        } else {
            out.push(b);
            rest = tail;
        }
    }
    Some(PathBuf::from(std::ffi::OsString::from_vec(out)))
}

/// The key: the git directory and the variables, each escaped (a space
/// between them), as git's bytes are: where two paths differ only in
/// bytes that are not UTF-8, or in a newline and a space, so do the keys.
fn key(git_dir: &Path) -> String {
    let mut k = escape(git_dir.as_os_str().as_encoded_bytes());
    for v in ENV {
        k.push(' ');
        if let Some(val) = std::env::var_os(v) {
            k.push_str(&escape(val.as_encoded_bytes()));
        }
    }
    k.push('\n');
    k
}

fn field(o: Option<&String>) -> String {
    o.map_or("-".into(), |s| s.replace('\n', " "))
}

/// The cache file's text for `s`, which came from `files`.
pub fn render(git_dir: &Path, s: &Settled, files: &[PathBuf]) -> String {
    let enable = s.enable.as_ref().map(|(b, at)| format!("{b} {at}"));
    let mut t = format!(
        "{MAGIC}\nkey {}enable {}\nthrash {}\nerror {}\nbadenable {}\n",
        key(git_dir),
        field(enable.as_ref()),
        field(s.thrash.as_ref()),
        field(s.error.as_ref()),
        field(s.bad_enable.as_ref())
    );
    for f in files {
        let path = escape(f.as_os_str().as_encoded_bytes());
        t.push_str(&format!("file {}\t{path}\n", identity(f)));
    }
    // The count of files closes the entry: one cut short, or with a line
    // gone, is no answer (it would outlive every change it missed).
    t.push_str(&format!("end {}\n", files.len()));
    t
}

/// The answer in `text` if it is for `git_dir` and every file is as it was.
#[cfg(test)]
pub fn parse(git_dir: &Path, text: &str) -> Option<Settled> {
    parse_keyed(&key(git_dir), text)
}

/// [`parse`], for the key of `git_dir` (made once per run: it reads
/// eight variables).
fn parse_keyed(key: &str, text: &str) -> Option<Settled> {
    let body = text.strip_prefix(MAGIC)?.strip_prefix('\n')?;
    let body = body.strip_prefix("key ")?.strip_prefix(key)?;
    let mut s = Settled::default();
    let (body, end) = body.strip_suffix('\n')?.rsplit_once('\n')?;
    let count = end.strip_prefix("end ")?.parse::<usize>().ok()?;
    let mut files = 0;
    for line in body.lines() {
        let (tag, rest) = line.split_once(' ')?;
        let value = (rest != "-").then(|| rest.to_string());
        match tag {
            "enable" => {
                s.enable = match value {
                    None => None,
                    Some(v) => {
                        let (b, at) = v.split_once(' ')?;
                        Some((b.parse().ok()?, at.to_string()))
                    }
                }
            }
            "thrash" => s.thrash = value,
            "error" => s.error = value,
            "badenable" => s.bad_enable = value,
            "file" => {
                files += 1;
                let (id, path) = rest.split_once('\t')?;
                if !same_identity(&unescape(path)?, id) {
                    return None;
                }
            }
            _ => return None,
        }
    }
    (files == count).then_some(s)
}

/// Whether any of `files` changed within the last `RACY`.
fn racy(files: &[PathBuf]) -> bool {
    let now = SystemTime::now();
    files.iter().any(|f| {
        std::fs::metadata(f).is_ok_and(|m| {
            let t = |s: i64, ns: i64| {
                SystemTime::UNIX_EPOCH
                    + Duration::new(s.max(0) as u64, ns.clamp(0, 999_999_999) as u32)
            };
            let changed = t(m.mtime(), m.mtime_nsec()).max(t(m.ctime(), m.ctime_nsec()));
            now.duration_since(changed).map_or(true, |d| d < RACY)
        })
    })
}

/// The cached answer for `git_dir`, or `compute`'s (stored when it can be).
/// `compute` gives no files where what the answer hangs on cannot be
/// watched: then it is not stored.
pub fn cached(
    git_dir: &Path,
    compute: impl FnOnce() -> (Settled, Option<Vec<PathBuf>>),
) -> Settled {
    let dir = dir();
    let key = key(git_dir);
    let file = dir
        .as_ref()
        .map(|d| d.join(format!("{:016x}", fnv(key.as_bytes()))));
    if let Some(s) = file
        .as_ref()
        .and_then(|f| read_regular(f))
        .and_then(|t| parse_keyed(&key, &t))
    {
        return s;
    }
    let (s, files) = compute();
    // "git could not tell" says nothing lasting about the repository: a
    // `-C` that missed, GIT_CEILING_DIRECTORIES, a git that could not be
    // run. Stored, it would keep munmapq out until a file changed.
    let Some(files) = files.filter(|_| s.error.is_none()) else {
        return s;
    };
    if let (Some(dir), Some(file)) = (dir, file) {
        if !racy(&files) {
            store(&dir, &file, &render(git_dir, &s, &files));
        }
    }
    s
}

/// The text of `file` if it is a regular file: a FIFO or a device there
/// (or a symbolic link to one) would block the wrapper before git ran, so
/// it is opened without blocking or following a link, and looked at
/// before it is read. Larger than any entry: not one.
fn read_regular(file: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    const MAX: u64 = 1 << 20;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(file)
        .ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || m.len() > MAX {
        return None;
    }
    let mut text = String::new();
    f.take(MAX).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Writes the file whole (a temporary file renamed over it); on any error
/// nothing is cached. (The launcher's `codesign` cache writes its files so
/// too.)
pub(crate) fn store(dir: &Path, file: &Path, text: &str) {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
    let tmp = file.with_extension(format!("{}", std::process::id()));
    // Made new, never through what is there (a link would have us write
    // where it points): that is left by a wrapper of the same pid, or
    // planted, and removed (a link itself, not what it names).
    let _ = std::fs::remove_file(&tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
    if written.is_err() || std::fs::rename(&tmp, file).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Whether to say, now, that no cache directory could take the library:
/// once a day, remembered by a file of this user's in $XDG_RUNTIME_DIR or
/// /dev/shm (tmpfs, writable when /tmp and the home are not); said every
/// time when neither can be written.
pub fn first_warning() -> bool {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let dirs = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .into_iter()
        .chain([PathBuf::from("/dev/shm")]);
    for d in dirs {
        let marker = d.join(format!("munmapq-{uid}-no-cache-warned"));
        if let Ok(m) = std::fs::symlink_metadata(&marker) {
            let fresh = m.modified().is_ok_and(|t| {
                SystemTime::now()
                    .duration_since(t)
                    .is_ok_and(|age| age < Duration::from_secs(24 * 3600))
            });
            if m.uid() == uid && m.is_file() && fresh {
                return false;
            }
            if m.uid() == uid {
                let _ = std::fs::remove_file(&marker);
            } else {
                continue;
            }
        }
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&marker);
        if made.is_ok() {
            return true;
        }
    }
    true
}

/// The identity of a file or directory: what changes when it is written,
/// replaced or removed.
pub fn identity(p: &Path) -> String {
    match std::fs::metadata(p) {
        Ok(m) => format!(
            "{} {} {} {}.{} {}.{}",
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec()
        ),
        Err(_) => "absent".into(),
    }
}

/// Whether `p`'s identity is still `id` (as [`identity`] wrote it),
/// read back as numbers: the wrapper checks every file of its cached
/// answer before each git, and formatting each would cost more.
fn same_identity(p: &Path, id: &str) -> bool {
    let Ok(m) = std::fs::metadata(p) else {
        return id == "absent";
    };
    let now = [
        m.dev() as i128,
        m.ino() as i128,
        m.size() as i128,
        m.mtime() as i128,
        m.mtime_nsec() as i128,
        m.ctime() as i128,
        m.ctime_nsec() as i128,
    ];
    let mut was = id.split([' ', '.']).map(|n| n.parse::<i128>());
    now.iter()
        .all(|n| was.next().is_some_and(|w| w.ok() == Some(*n)))
        && was.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_invalidates() {
        let dir = std::env::temp_dir().join(format!("munmapq-gitcache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = dir.join("config");
        std::fs::write(&cfg, "[core]\n").unwrap();
        let s = Settled {
            enable: Some((true, "x:1".into())),
            thrash: None,
            error: None,
            bad_enable: Some("maybe (x:2)".into()),
        };
        let files = vec![cfg.clone(), dir.join("absent")];
        let text = render(&dir, &s, &files);
        assert!(files.iter().all(|f| same_identity(f, &identity(f))));
        assert!(!same_identity(&cfg, &identity(&dir)));
        assert_eq!(parse(&dir, &text), Some(s));
        assert_eq!(parse(&dir.join("other"), &text), None);
        let cut = text.rsplit_once("file ").unwrap().0;
        assert_eq!(parse(&dir, cut), None, "cut short");
        let lost: String = text
            .lines()
            .filter(|l| !l.starts_with("file "))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(parse(&dir, &lost), None, "a line gone");
        std::fs::write(&cfg, "[core]\n\tx = 1\n").unwrap();
        assert_eq!(parse(&dir, &text), None);
        let text = render(&dir, &Settled::default(), &files);
        std::fs::write(dir.join("absent"), "").unwrap();
        assert_eq!(parse(&dir, &text), None);
        assert!(racy(&files));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
