//! The library built into the launcher (see build.rs), written once to a
//! per-user cache directory and checked before every use: the directory
//! must belong to this user and be writable by nobody else, and the file's
//! bytes must be exactly the embedded ones, so a library another user could
//! have replaced is never loaded.
//!
//! Where: `$XDG_CACHE_HOME/munmapq` (only if absolute, as the XDG spec
//! says), else `~/.cache/munmapq`, else `$TMPDIR/munmapq-UID` (`/tmp`): the
//! first that works, so a user without a writable home still runs. Each
//! version has its own directory there; one that no launcher has used for
//! [`UNUSED_DAYS`] is removed (see [`prune`]).

use crate::out::why;
use crate::platform::{LIB_NAME, PRELOAD_VAR};
use crate::quote::quote_path;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The library build.rs built (a launcher is never built without it).
#[cfg(target_os = "macos")]
const BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libmunmapq.dylib"));
#[cfg(not(target_os = "macos"))]
const BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libmunmapq.so"));

/// A version directory no launcher has used for this long is removed.
pub const UNUSED_DAYS: u64 = 30;
const DAY: Duration = Duration::from_secs(24 * 3600);

/// The embedded library's FNV-1a hash, worked out by build.rs: hashing its
/// bytes here would cost every launcher run half a million instructions.
const ID: &str = env!("MUNMAPQ_BUILT_IN_LIBRARY");

/// Creates `p` and its missing parents (0700, as the XDG spec asks),
/// naming the one that could not be made.
fn create_dirs(p: &Path) -> Result<(), String> {
    let missing: Vec<&Path> = p
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && std::fs::symlink_metadata(a).is_err())
        .collect();
    for dir in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("{}: {}", quote_path(dir), why(&e))),
        }
    }
    Ok(())
}

/// A directory of ours: created 0700 if missing, else it must be owned by
/// us and not writable by group or others (`strict`: no group or other
/// access at all, for the one in a shared temporary directory).
fn private_dir(p: &Path, strict: bool) -> Result<std::fs::Metadata, String> {
    create_dirs(p)?;
    let m = std::fs::symlink_metadata(p).map_err(|e| format!("{}: {}", quote_path(p), why(&e)))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let forbidden = if strict { 0o077 } else { 0o022 };
    if !m.is_dir() || m.uid() != me || m.permissions().mode() & forbidden != 0 {
        return Err(format!(
            "{}: not a private directory of uid {me} (owner {}, mode {:o}), not used",
            quote_path(p),
            m.uid(),
            m.permissions().mode() & 0o7777
        ));
    }
    Ok(m)
}

/// Where the cache may live, in order, each with whether it is in a shared
/// temporary directory.
fn cache_roots() -> Vec<(PathBuf, bool)> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let mut roots = Vec::new();
    if let Some(x) = absolute("XDG_CACHE_HOME") {
        roots.push((x.join("munmapq"), false));
    }
    // Without HOME, the home /etc/passwd gives (as git and ssh do).
    if let Some(h) = absolute("HOME").or_else(passwd_home) {
        roots.push((h.join(".cache/munmapq"), false));
    }
    let tmp = Some(std::env::temp_dir())
        .filter(|t| t.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    roots.push((tmp.join(format!("munmapq-{uid}")), true));
    roots
}

/// This user's home directory as the password database says.
fn passwd_home() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: getpwuid_r writes into the zeroed passwd and the buffer we
    // own (with their sizes); `result` is null or points at `pw`.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let r = libc::getpwuid_r(
            libc::getuid(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        );
        if r != 0 || result.is_null() || pw.pw_dir.is_null() {
            return None;
        }
        let dir = std::ffi::CStr::from_ptr(pw.pw_dir).to_bytes();
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(dir))).filter(|p| p.is_absolute())
    }
}

/// The embedded library's path, writing it first if needed. (Always
/// `Some`: build.rs fails rather than build a launcher without a library.)
pub fn library() -> Option<Result<PathBuf, String>> {
    let mut failed = Vec::new();
    let list = crate::platform::PRELOAD_LIST;
    for (root, strict) in cache_roots() {
        // The library's path goes into the preload list, which has no
        // quoting: under a root the list would split, it never loads.
        // (What write_once adds, the version and the file name, holds no
        // separator.)
        if list.would_split(&root) {
            failed.push(format!(
                "{}: {PRELOAD_VAR} would split its path (at {}), not used",
                quote_path(&root),
                list.separators()
            ));
            continue;
        }
        match write_once(BYTES, ID, &root, strict) {
            Ok(p) => return Some(Ok(p)),
            Err(e) => failed.push(e),
        }
    }
    Some(Err(format!(
        "cannot write the library munmapq carries to a cache directory ({}); \
         give one with --lib PATH, or set XDG_CACHE_HOME to a directory of yours",
        failed.join("; ")
    )))
}

/// Writes `bytes`, whose hash is `id`, to its version's directory under
/// `root` unless the file there holds exactly those bytes; answers its path.
pub fn write_once(bytes: &[u8], id: &str, root: &Path, strict: bool) -> Result<PathBuf, String> {
    private_dir(root, strict)?;
    let name = format!("{}-{id}", env!("CARGO_PKG_VERSION"));
    let dir = root.join(&name);
    let new = std::fs::symlink_metadata(&dir).is_err();
    let m = private_dir(&dir, strict)?;
    // Mark this version as in use, at most once a day (so a launcher run
    // costs no write), and then prune the versions nobody marked.
    let now = SystemTime::now();
    if new || m.modified().map_or(true, |t| t + DAY < now) {
        let _ = std::fs::File::open(&dir).and_then(|d| d.set_modified(now));
        prune(root, &name, now);
    }
    let path = dir.join(LIB_NAME);
    if let Ok(existing) = std::fs::read(&path) {
        if existing == bytes {
            return Ok(path);
        }
        let _ = std::fs::remove_file(&path);
    }
    let tmp = dir.join(format!(".{LIB_NAME}.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o500)
        .open(&tmp)
        .map_err(|e| format!("{}: {}", quote_path(&tmp), why(&e)))?;
    f.write_all(bytes)
        .map_err(|e| format!("{}: {}", quote_path(&tmp), why(&e)))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {}", quote_path(&path), why(&e)))?;
    Ok(path)
}

/// Is `name` a version directory as [`write_once`] names them
/// (`VERSION-` and 16 hex digits)?
fn is_version_dir(name: &str) -> bool {
    name.rsplit_once('-').is_some_and(|(v, h)| {
        !v.is_empty() && h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

/// Removes the other versions' directories that no launcher has marked for
/// [`UNUSED_DAYS`]. A launcher of another version that is running (or ran
/// this month) marked its directory when it started, so its library is
/// never removed under the processes it starts; only one kept in a raw
/// `LD_PRELOAD` for a month without any launcher of that version running
/// would be (ld.so then says so and runs the program without it). dyld
/// would kill the program instead, which is why `preload-env` refuses on
/// macOS (`platform::shell_wide_ok`).
fn prune(root: &Path, current: &str, now: SystemTime) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let unused = DAY * UNUSED_DAYS as u32;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if name == current || !is_version_dir(name) {
            continue;
        }
        let old = e
            .metadata()
            .ok()
            .filter(|m| m.is_dir())
            .and_then(|m| m.modified().ok())
            .is_some_and(|t| t + unused < now);
        if old {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fnv(bytes: &[u8]) -> String {
        let h = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
            (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
        });
        format!("{h:016x}")
    }

    /// What build.rs hashed is the library embedded.
    #[test]
    fn the_version_names_this_library() {
        assert_eq!(ID, fnv(BYTES));
    }

    fn write_once(bytes: &[u8], root: &Path, strict: bool) -> Result<PathBuf, String> {
        super::write_once(bytes, &fnv(bytes), root, strict)
    }

    fn set_age(p: &Path, days: u64) {
        let t = SystemTime::now() - DAY * days as u32;
        std::fs::File::open(p).unwrap().set_modified(t).unwrap();
    }

    #[test]
    fn writes_once_and_refuses_foreign_directories() {
        let root = std::env::temp_dir().join(format!("munmapq-embed-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let p = write_once(b"library bytes", &root, false).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"library bytes");
        assert_eq!(
            std::fs::metadata(&root).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // Same bytes: same file. Tampered file: replaced.
        assert_eq!(write_once(b"library bytes", &root, false).unwrap(), p);
        let mut perm = std::fs::metadata(&p).unwrap().permissions();
        perm.set_mode(0o700);
        std::fs::set_permissions(&p, perm).unwrap();
        std::fs::write(&p, b"evil").unwrap();
        assert_eq!(
            std::fs::read(write_once(b"library bytes", &root, false).unwrap()).unwrap(),
            b"library bytes"
        );
        // A directory others can write to is refused; in a shared temporary
        // directory, one others can even read.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(write_once(b"library bytes", &root, false)
            .unwrap_err()
            .contains("not a private directory"));
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o750)).unwrap();
        assert!(write_once(b"library bytes", &root, false).is_ok());
        assert!(write_once(b"library bytes", &root, true).is_err());
        let _ = std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn prunes_versions_unused_for_a_month() {
        let root = std::env::temp_dir().join(format!("munmapq-prune-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let dir = |n: &str, days| {
            let d = root.join(n);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(LIB_NAME), b"x").unwrap();
            set_age(&d, days);
        };
        dir("0.0.1-0123456789abcdef", 40); // unused for 40 days: removed
        dir("0.0.2-0123456789abcdef", 2); // used this month: kept
        dir("mine", 40); // not a version directory: kept
        let p = write_once(b"new", &root, false).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let current = p.parent().unwrap().file_name().unwrap().to_str().unwrap();
        assert_eq!(left, ["0.0.2-0123456789abcdef", current, "mine"]);
        // Our own directory, marked a day ago or more, is marked again.
        set_age(p.parent().unwrap(), 3);
        write_once(b"new", &root, false).unwrap();
        let age = std::fs::metadata(p.parent().unwrap())
            .unwrap()
            .modified()
            .unwrap();
        assert!(age + DAY > SystemTime::now());
        let _ = std::fs::remove_dir_all(&root);
    }
}
