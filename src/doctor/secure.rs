//! Linux: whether running a program puts it in secure mode (`AT_SECURE`),
//! in which the dynamic linker ignores `LD_PRELOAD`. The kernel decides at
//! the exec, from the file and the caller's credentials:
//!
//! - fs/exec.c `bprm_fill_uid`: a set-user-ID file makes its owner the
//!   effective user, a set-group-ID one (with group execute; without it the
//!   bit means mandatory locking) its group the effective group; not on a
//!   nosuid mount, not under no_new_privs, and not where the owner or the
//!   group has no mapping in the caller's user namespace;
//! - security/commoncap.c `cap_bprm_creds_from_file`: secure where the
//!   effective ids change, where they differ from the real ones after the
//!   exec (so a caller whose real and effective ids already differ runs
//!   every program in secure mode), or where a caller other than real root
//!   gains capabilities from the file's (`security.capability`).
//!
//! Not seen from here: an LSM's domain transition (SELinux, AppArmor),
//! which may set secure mode too.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Why running `path` (whose metadata is `meta`) would be in secure mode,
/// or None.
pub fn why(path: &Path, meta: &std::fs::Metadata) -> Option<String> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    let me = Caller::now();
    let mode = meta.mode();
    let set_ids = !nosuid(&c) && !me.no_new_privs && mapped(meta.uid(), meta.gid());
    let setuid = set_ids && mode & 0o4000 != 0;
    let setgid = set_ids && mode & 0o2010 == 0o2010;
    let euid = if setuid { meta.uid() } else { me.euid };
    let egid = if setgid { meta.gid() } else { me.egid };
    if setuid && euid != me.euid || setgid && egid != me.egid {
        let what = match (setuid && euid != me.euid, setgid && egid != me.egid) {
            (true, true) => "setuid and setgid",
            (true, false) => "setuid",
            _ => "setgid",
        };
        return Some(format!("it is {what}, and the exec changes your ids"));
    }
    if euid != me.ruid || egid != me.rgid {
        return Some("your real and effective user or group ids differ".into());
    }
    if me.ruid != 0 && !me.no_new_privs && file_capabilities(&c) {
        return Some("it has file capabilities (setcap), which the exec grants you".into());
    }
    None
}

struct Caller {
    ruid: u32,
    euid: u32,
    rgid: u32,
    egid: u32,
    no_new_privs: bool,
}

impl Caller {
    fn now() -> Caller {
        // SAFETY: these calls take no pointers and cannot fail.
        unsafe {
            Caller {
                ruid: libc::getuid(),
                euid: libc::geteuid(),
                rgid: libc::getgid(),
                egid: libc::getegid(),
                no_new_privs: libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1,
            }
        }
    }
}

/// Whether the file system holding `path` ignores set-id bits.
fn nosuid(path: &CString) -> bool {
    // SAFETY: a NUL-terminated path and a zeroed struct the call fills;
    // it has no other effect.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        libc::statvfs(path.as_ptr(), &mut st) == 0 && st.f_flag & libc::ST_NOSUID != 0
    }
}

/// Whether the file's owner and group have a mapping in this process's
/// user namespace: `stat` shows an unmapped one as the overflow id. In the
/// initial namespace every id is mapped (and the overflow id is a user).
fn mapped(uid: u32, gid: u32) -> bool {
    let initial = std::fs::read_to_string("/proc/self/uid_map")
        .map(|m| m.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"])
        .unwrap_or(true);
    let overflow = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/fs/{name}"))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .unwrap_or(65534)
    };
    initial || (uid != overflow("overflowuid") && gid != overflow("overflowgid"))
}

/// Whether the file carries capabilities (`security.capability`).
fn file_capabilities(path: &CString) -> bool {
    // SAFETY: NUL-terminated names; a null buffer of size 0 only asks for
    // the attribute's size.
    unsafe {
        libc::getxattr(
            path.as_ptr(),
            c"security.capability".as_ptr(),
            std::ptr::null_mut(),
            0,
        ) > 0
    }
}
