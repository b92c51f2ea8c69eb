//! What a command is: where a shell would find it, what a script's `#!`
//! line names, whether macOS's System Integrity Protection covers it.

use std::path::{Path, PathBuf};

/// Finds `cmd` as a shell would (a path, or a name in `$PATH`).
pub fn resolve(cmd: &str) -> Option<PathBuf> {
    if cmd.contains('/') {
        let p = PathBuf::from(cmd);
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(cmd))
            .find(|p| {
                use std::os::unix::fs::PermissionsExt;
                p.metadata()
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    })
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
#[cfg_attr(not(target_os = "macos"), allow(dead_code))] // macOS and tests
pub fn sip_protected(path: &Path) -> bool {
    let p = path.to_string_lossy();
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
