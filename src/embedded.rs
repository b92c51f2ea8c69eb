//! The library built into the launcher (see build.rs), written once to a
//! per-user cache directory and checked before every use: the directory
//! must belong to this user and be writable by nobody else, and the file's
//! bytes must be exactly the embedded ones, so a library another user could
//! have replaced is never loaded.

use crate::platform::LIB_NAME;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The library build.rs built (a launcher is never built without it).
#[cfg(target_os = "macos")]
const BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libmunmapq.dylib"));
#[cfg(not(target_os = "macos"))]
const BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libmunmapq.so"));

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A directory of ours: created 0700 if missing, else it must be owned by
/// us and not writable by group or others.
fn private_dir(p: &Path) -> Result<(), String> {
    match std::fs::DirBuilder::new().mode(0o700).create(p) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("{}: {e}", p.display())),
    }
    let m = std::fs::symlink_metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !m.is_dir() || m.uid() != me || m.permissions().mode() & 0o022 != 0 {
        return Err(format!(
            "{} is not a private directory of this user (owner {}, mode {:o}); refusing to use a library from it",
            p.display(),
            m.uid(),
            m.permissions().mode() & 0o7777
        ));
    }
    Ok(())
}

/// Where the cache lives: $XDG_CACHE_HOME/munmapq, ~/.cache/munmapq, or
/// /tmp/munmapq-UID.
fn cache_root() -> PathBuf {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
    match std::env::var_os("XDG_CACHE_HOME").filter(|h| !h.is_empty()) {
        Some(x) => PathBuf::from(x).join("munmapq"),
        None => match home {
            Some(h) => PathBuf::from(h).join(".cache/munmapq"),
            // SAFETY: getuid has no preconditions.
            None => std::env::temp_dir().join(format!("munmapq-{}", unsafe { libc::getuid() })),
        },
    }
}

/// The embedded library's path, writing it first if needed. (Always
/// `Some`: build.rs fails rather than build a launcher without a library.)
pub fn library() -> Option<Result<PathBuf, String>> {
    Some(write_once(BYTES, &cache_root()))
}

pub fn write_once(bytes: &[u8], root: &Path) -> Result<PathBuf, String> {
    if let Some(parent) = root.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    private_dir(root)?;
    let dir = root.join(format!("{}-{:016x}", env!("CARGO_PKG_VERSION"), fnv(bytes)));
    private_dir(&dir)?;
    let path = dir.join(LIB_NAME);
    if let Ok(existing) = std::fs::read(&path) {
        if existing == bytes {
            return Ok(path);
        }
        let _ = std::fs::remove_file(&path);
    }
    let tmp = dir.join(format!(".{LIB_NAME}.{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o500)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    f.write_all(bytes)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_once_and_refuses_foreign_directories() {
        let root = std::env::temp_dir().join(format!("munmapq-embed-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let p = write_once(b"library bytes", &root).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"library bytes");
        assert_eq!(
            std::fs::metadata(&root).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // Same bytes: same file. Tampered file: replaced.
        assert_eq!(write_once(b"library bytes", &root).unwrap(), p);
        let mut perm = std::fs::metadata(&p).unwrap().permissions();
        perm.set_mode(0o700);
        std::fs::set_permissions(&p, perm).unwrap();
        std::fs::write(&p, b"evil").unwrap();
        assert_eq!(
            std::fs::read(write_once(b"library bytes", &root).unwrap()).unwrap(),
            b"library bytes"
        );
        // A directory others can write to is refused.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(write_once(b"library bytes", &root)
            .unwrap_err()
            .contains("not a private directory"));
        let _ = std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700));
        let _ = std::fs::remove_dir_all(&root);
    }
}
