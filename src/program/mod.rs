//! What a command is: where a shell would find it, what a script's `#!`
//! line names, whether macOS's System Integrity Protection covers it.
//! Its children read the file itself: `script` follows `#!` lines to the
//! program that runs, `elf` reads an ELF program's interpreter and
//! needed libraries, `asan` judges AddressSanitizer from those.

pub mod asan;
pub mod cannot_run;
pub mod elf;
pub mod script;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Finds `cmd` as a shell would (a path, or a name in the search path).
pub fn resolve(cmd: &str) -> Option<PathBuf> {
    if cmd.contains('/') {
        let p = PathBuf::from(cmd);
        return p.is_file().then_some(p);
    }
    std::env::split_paths(&search_path())
        .map(|d| d.join(cmd))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Whether this process may execute the file `path`, as the kernel checks
/// at exec (its effective ids): an exec of one it may not fails with
/// EACCES, and execvp passes over it.
pub fn may_execute(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes()).is_ok_and(|c| {
        // SAFETY: a NUL-terminated path; faccessat only reads it.
        unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::X_OK, libc::AT_EACCESS) == 0 }
    })
}

/// Where commands are searched: `$PATH`, or where PATH is unset the
/// system's default path, as `env` and `execvp` search it
/// (`confstr(_CS_PATH)`: `/bin:/usr/bin` with glibc).
pub fn search_path() -> OsString {
    if let Some(p) = std::env::var_os("PATH") {
        return p;
    }
    let mut buf = [0u8; 256];
    // SAFETY: confstr writes at most buf.len() bytes, NUL included, into
    // the buffer we own, and returns the length the whole value needs.
    let n = unsafe { libc::confstr(libc::_CS_PATH, buf.as_mut_ptr().cast(), buf.len()) };
    match n {
        1..=256 => {
            use std::os::unix::ffi::OsStrExt;
            std::ffi::OsStr::from_bytes(&buf[..n - 1]).to_owned()
        }
        _ => "/bin:/usr/bin".into(),
    }
}

/// The interpreter a `#!` line names, if the file starts with one.
pub fn shebang(head: &[u8]) -> Option<String> {
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|&c| c == b'\n').next().unwrap_or(b"");
    Some(
        String::from_utf8_lossy(line)
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string(),
    )
}

/// Paths System Integrity Protection covers: programs there drop every
/// `DYLD_*` variable (including `/bin/sh`, which git runs subprocesses with).
/// `path` must be canonical (`sip_protected_file` makes it so): a symlink
/// elsewhere that points into `/usr/bin` is just as protected. The data
/// volume's mount point, `/System/Volumes/Data`, holds the writable part of
/// the root (`/usr/local`, `/opt`, `/Users`), which SIP does not cover: its
/// paths are judged as the root's.
#[cfg_attr(not(target_os = "macos"), allow(dead_code))] // macOS and tests
pub fn sip_protected(path: &Path) -> bool {
    let p = path.to_string_lossy();
    let p = match p.strip_prefix("/System/Volumes/Data/") {
        Some(rest) => format!("/{rest}"),
        None => p.into_owned(),
    };
    [
        "/usr/bin/",
        "/bin/",
        "/sbin/",
        "/usr/sbin/",
        "/usr/libexec/",
        "/System/",
    ]
    .iter()
    .any(|d| p.starts_with(d))
        && !p.starts_with("/usr/local/")
}

/// `sip_protected` of where `path` really is: symlinks resolved (a
/// `~/bin/git` that points at `/usr/bin/git` is the SIP-protected shim). A
/// path that cannot be resolved is judged as written.
#[cfg_attr(not(target_os = "macos"), allow(dead_code))] // macOS and tests
pub fn sip_protected_file(path: &Path) -> bool {
    match path.canonicalize() {
        Ok(real) => sip_protected(&real),
        Err(_) => sip_protected(path),
    }
}

/// For the tests: `DIR/sh`, a symlink to /bin/sh (which exists on Linux
/// too, under /usr/bin on merged-/usr systems) in a directory of its own
/// under the temporary directory, named after `tag` and the process.
/// Returns (DIR, the link).
#[cfg(test)]
pub fn sh_symlink(tag: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("munmapq-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("sh");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("/bin/sh", &link).unwrap();
    (dir, link)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sip_paths() {
        for p in [
            "/usr/bin/git",
            "/bin/sh",
            "/usr/libexec/x",
            "/System/x",
            "/sbin/x",
        ] {
            assert!(sip_protected(Path::new(p)), "{p}");
        }
        for p in [
            "/usr/local/bin/git",
            "/opt/homebrew/bin/git",
            "/Users/me/bin/git",
            "/System/Volumes/Data/opt/homebrew/bin/git",
            "/System/Volumes/Data/usr/local/bin/git",
        ] {
            assert!(!sip_protected(Path::new(p)), "{p}");
        }
        assert!(sip_protected(Path::new("/System/Volumes/Data/System/x")));
    }

    /// A symlink from an unprotected directory into a protected one is
    /// judged where it points.
    #[test]
    fn sip_follows_symlinks() {
        let (dir, link) = super::sh_symlink("sip");
        assert!(!sip_protected(&link));
        assert!(sip_protected_file(&link));
        // Not resolvable: judged as written.
        assert!(sip_protected_file(Path::new(
            "/usr/bin/no-such-program-here"
        )));
        assert!(!sip_protected_file(&dir.join("missing")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
