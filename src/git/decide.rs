//! Does munmapq pay for git here? The git wrapper (git/wrap.rs) asks before
//! every git it runs, so the answer must be cheap:
//!
//! - `git config munmapq.enable true|false` decides when set;
//! - else munmapq pays where git would thrash its pack windows (the
//!   doctor's check, git/check.rs), on every platform;
//! - many loose objects (more than git's own `gc --auto` threshold, 6700,
//!   estimated as `gc --auto` does, from the entries of `objects/17` times
//!   256) qualify where the platform's rule, [`LOOSE`], says they pay: git
//!   maps each loose object whole and unmaps it at once, so every munmap
//!   is the file's last mapping;
//! - anywhere else, and outside a repository, git runs as it is.
//!
//! Every reason starts with the rule that decided (`rule enable`, `rule
//! thrash`, `rule loose (linux)`, ...): `munmapq doctor git` prints it.
//!
//! The configuration and the packs need git to read them (a few
//! milliseconds), so that part is cached per repository in the user's
//! cache directory, with the identity (device, inode, size, mtime, ctime)
//! of every file it came from: each configuration file git read (includes
//! too), the ones it would read if they existed, and the pack directory.
//! Any change to one of them and the next git asks again. The loose object
//! estimate (one small directory read) is made every time.

use crate::git::cache::Settled;
use crate::git::check::Packs;
use crate::git::repo::{self, boolean, global_options, last, sets_config, start_dir, Entry, Repo};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// git's default `gc.auto`: more loose objects than this and git packs them.
pub const MANY_LOOSE: u64 = 6700;

#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub wrap: bool,
    pub reason: String,
    /// A setting of ours that is wrong, said on stderr.
    pub warning: Option<String>,
}

/// The decision for a git run with arguments `args` (after `git`), from
/// the current directory.
pub fn decide(args: &[OsString]) -> Decision {
    let prefix = global_options(args);
    let Some(found) = discover(&prefix) else {
        return no("not in a git repository");
    };
    let settled = if sets_config(&prefix)
        || std::env::var_os("GIT_CONFIG_PARAMETERS").is_some()
        || std::env::var_os("GIT_CONFIG_COUNT").is_some()
    {
        settle(&prefix).0
    } else {
        crate::git::cache::cached(&found.git_dir, || settle(&prefix))
    };
    judge(&settled, loose_estimate(&found.objects))
}

fn no(reason: &str) -> Decision {
    Decision {
        wrap: false,
        reason: reason.into(),
        warning: None,
    }
}

/// Whether many loose objects alone make munmapq pay, per platform, and
/// the measurement that says so.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LooseRule {
    pub platform: &'static str,
    pub pays: bool,
    pub why: &'static str,
}

/// Linux: a small private file mapping is cheap to make and to unmap (no
/// last-mapping work), and what munmapq adds to each eligible call (a
/// `statx`, its table and queue) costs more than a reuse saves when only
/// a third of the maps are reused. Measured on a shallow clone of git.git
/// unpacked loose (402k objects, warm cache, paired runs): `git blame` 1.13x
/// CPU with munmapq (413k -> 475k syscalls), `git log --stat` 1.01x. Since
/// then a close no longer walks the table and the library steps aside where
/// fewer than a quarter of the small maps are reused (core/src/payoff.rs):
/// on a generated loose repository (`scripts/bench-loose.sh`, BENCHMARKS.md
/// "The whole set") it measured 0.87-0.92x CPU for `blame` and `log
/// --stat`, 1.00x for `prune`, with more system calls (a `statx` a map, two
/// a miss) and half the page faults. Until that holds on a real clone, loose objects alone do not
/// turn the wrapper on here (`git config munmapq.enable true` does).
pub const LINUX_LOOSE: LooseRule = LooseRule {
    platform: "linux",
    pays: false,
    why: "on Linux a small file map is cheap to make and to unmap, and munmapq measured \
          slower there on loose objects (git blame 1.13x CPU: each map adds a statx, and \
          only a third were reused)",
};

/// macOS: unmapping a file's last mapping is the dear case (its copy
/// object is torn down and `ubc_unmap` runs, then rebuilt at the next map:
/// probes/src/bin/mq-replay/lastmap.rs), and every loose object git reads
/// is unmapped as its file's last mapping. The seed measured that cost
/// (518 min of window munmaps against 2 min 26 s queued). The queue saves
/// such a teardown where the object is read again while its mapping is
/// queued, and otherwise only defers it: replayed under macOS's rules
/// (`mq-replay --rules macos`, BENCHMARKS.md "Loose objects under macOS's
/// rules"), `git log --stat` on the generated loose repository makes
/// 25,250 teardowns with the queue (and 2,863 at exit) against 59,183,
/// `git blame` 15,277 (2,179) against 29,532; `git prune`, with no reuse,
/// 65,536 (3,292) against 68,829, and there the library steps aside
/// (core/src/payoff.rs). The Mac CI job runs the library there; no
/// loose-object timing on macOS yet.
pub const MACOS_LOOSE: LooseRule = LooseRule {
    platform: "macos",
    pays: true,
    why: "on macOS each loose object's munmap is its file's last mapping, the dear case \
          there, and each object read again saves one (replayed: 25,250 against 59,183 \
          for git log --stat); where reuse is rare the library steps aside",
};

/// This platform's rule for loose objects.
pub const LOOSE: LooseRule = if cfg!(target_os = "macos") {
    MACOS_LOOSE
} else {
    LINUX_LOOSE
};

/// The rules, on what was found, with this platform's rule for loose
/// objects.
pub fn judge(s: &Settled, loose: u64) -> Decision {
    judge_with(s, loose, LOOSE)
}

/// The rules, with `rule` for loose objects; a `munmapq.enable` that is
/// not a boolean is said, and taken as unset.
pub fn judge_with(s: &Settled, loose: u64, rule: LooseRule) -> Decision {
    let mut d = judge_settings(s, loose, rule);
    d.warning = s.bad_enable.as_ref().map(|v| {
        format!("git config munmapq.enable={v} is not a boolean (true or false): taken as unset")
    });
    d
}

fn judge_settings(s: &Settled, loose: u64, rule: LooseRule) -> Decision {
    let yes = |reason: String| Decision {
        wrap: true,
        reason,
        warning: None,
    };
    if let Some(err) = &s.error {
        return no(&format!("rule error: git could not say: {err}"));
    }
    match &s.enable {
        Some((true, at)) => return yes(format!("rule enable: munmapq.enable=true ({at})")),
        Some((false, at)) => return no(&format!("rule enable: munmapq.enable=false ({at})")),
        None => {}
    }
    if let Some(t) = &s.thrash {
        return yes(format!(
            "rule thrash: git thrashes its pack windows here with {t}"
        ));
    }
    let platform = rule.platform;
    if loose > MANY_LOOSE {
        let what = format!("about {loose} loose objects (more than {MANY_LOOSE})");
        return if rule.pays {
            yes(format!("rule loose ({platform}): {what}: {}", rule.why))
        } else {
            no(&format!(
                "rule loose ({platform}): {what} do not qualify: {}; git does not thrash its \
                 pack windows here (munmapq pays there, or with git config munmapq.enable true)",
                rule.why
            ))
        };
    }
    let loose_pays = if rule.pays {
        format!(", or above {MANY_LOOSE} loose objects")
    } else {
        String::new()
    };
    no(&format!(
        "rule default: git does not thrash its pack windows here and has about {loose} loose \
         objects (munmapq pays where git thrashes{loose_pays}, or with git config munmapq.enable \
         true)"
    ))
}

/// Asks git (the slow part), and the files the answer depends on.
/// (None: the answer hangs on what no file's identity shows; not cached.)
pub fn settle(prefix: &[OsString]) -> (Settled, Option<Vec<PathBuf>>) {
    let found = repo::repo(prefix).and_then(|r| r.config(prefix).map(|c| (r, c)));
    let (repo, entries) = match found {
        Ok(r) => r,
        Err(e) => {
            let s = Settled {
                error: Some(e),
                ..Settled::default()
            };
            return (s, None);
        }
    };
    let set = last(&entries, "munmapq.enable").map(|e| {
        let at = crate::git::check::describe_origin(&e.origin, "munmapq.enable");
        (
            boolean(e.value.as_deref()),
            e.value.clone().unwrap_or_default(),
            at,
        )
    });
    let enable = set
        .as_ref()
        .and_then(|(b, _, at)| b.map(|b| (b, at.clone())));
    let bad_enable = set
        .as_ref()
        .filter(|(b, _, _)| b.is_none())
        .map(|(_, v, at)| format!("{v} ({at})"));
    let packs = Packs::of(&repo, &entries);
    let culprits = packs.culprits();
    let thrash = (!culprits.is_empty()).then(|| {
        culprits
            .iter()
            .map(|s| format!("{}={} ({})", s.key, s.raw, s.origin))
            .collect::<Vec<_>>()
            .join(" and ")
    });
    let settled = Settled {
        enable,
        thrash,
        error: None,
        bad_enable,
    };
    let Some(included) = includes(&repo, &entries) else {
        return (settled, None);
    };
    let Some(mut files) = config_candidates(&repo) else {
        return (settled, None);
    };
    files.extend(included);
    files.push(repo.pack_dir.clone());
    files.extend(entries.iter().filter_map(|e| e.file.clone()));
    files.sort();
    files.dedup();
    (settled, Some(files))
}

/// What the answer depends on beyond the files git read: every file an
/// include names, resolved as git resolves it (config.c,
/// `handle_path_include`), whether it exists or not (one created later
/// changes the answer), and `HEAD` where a condition tests the branch
/// (`includeIf "onbranch:..."`). None: an include whose file cannot be
/// told here (`~user/`, `%(prefix)/`): such an answer is not cached.
fn includes(repo: &Repo, entries: &[Entry]) -> Option<Vec<PathBuf>> {
    let mut v = Vec::new();
    for e in entries {
        let key = e.key.as_str();
        let Some(what) = key.strip_suffix(".path") else {
            continue;
        };
        match what.strip_prefix("includeif.") {
            Some(cond) if cond.starts_with("onbranch:") => v.push(repo.git_dir.join("HEAD")),
            Some(_) => {}
            None if what == "include" => {}
            None => continue,
        }
        let Some(value) = e.value.as_deref().filter(|p| !p.is_empty()) else {
            continue;
        };
        let path = if let Some(rest) = value.strip_prefix("~/") {
            PathBuf::from(std::env::var_os("HOME")?).join(rest)
        } else if value.starts_with('~') || value.starts_with("%(prefix)/") {
            return None;
        } else if Path::new(value).is_absolute() {
            PathBuf::from(value)
        } else {
            // Relative to the file that holds the include (an include
            // from elsewhere, git refuses).
            match &e.file {
                Some(file) => file.parent()?.join(value),
                None => continue,
            }
        };
        v.push(path);
    }
    Some(v)
}

/// The configuration files git reads or would read if they existed
/// (git's config.c: system, global, repository, worktree). None: git
/// would not say which system file it reads.
fn config_candidates(repo: &Repo) -> Option<Vec<PathBuf>> {
    let var = |v: &str| {
        std::env::var_os(v)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    };
    let mut v = Vec::new();
    if std::env::var_os("GIT_CONFIG_NOSYSTEM").is_none() {
        // Not /etc/gitconfig for every git: one built under /usr/local
        // reads /usr/local/etc/gitconfig.
        match var("GIT_CONFIG_SYSTEM") {
            Some(s) => v.push(s),
            None => v.push(repo::system_config()?),
        }
    }
    match var("GIT_CONFIG_GLOBAL") {
        Some(g) => v.push(g),
        None => {
            let home = var("HOME");
            if let Some(h) = &home {
                v.push(h.join(".gitconfig"));
            }
            if let Some(x) = var("XDG_CONFIG_HOME")
                .filter(|x| x.is_absolute())
                .or_else(|| home.map(|h| h.join(".config")))
            {
                v.push(x.join("git/config"));
            }
        }
    }
    v.push(repo.common_dir.join("config"));
    v.push(repo.git_dir.join("config.worktree"));
    Some(v)
}

/// A repository as found without running git.
pub struct Found {
    /// The git directory, canonical: the cache's key.
    pub git_dir: PathBuf,
    pub objects: PathBuf,
}

/// Finds the repository git would use, as git's setup does: `--git-dir`
/// or `$GIT_DIR`, else the first directory up from where git starts that
/// holds `.git` (a directory, or a file `gitdir: PATH`) or is a bare
/// repository.
pub fn discover(prefix: &[OsString]) -> Option<Found> {
    let start = start_dir(prefix);
    let explicit = prefix
        .iter()
        .zip(prefix.iter().skip(1))
        .filter(|(a, _)| *a == "--git-dir")
        .map(|(_, v)| v.clone())
        .chain(prefix.iter().filter_map(|a| {
            a.to_str()
                .and_then(|s| s.strip_prefix("--git-dir="))
                .map(OsString::from)
        }))
        .last()
        .or_else(|| std::env::var_os("GIT_DIR").filter(|d| !d.is_empty()));
    let git_dir = match explicit {
        Some(d) => gitfile_or_dir(&start.join(d))?,
        None => start.ancestors().find_map(|d| {
            let dot = d.join(".git");
            gitfile_or_dir(&dot).or_else(|| is_git_dir(d).then(|| d.to_path_buf()))
        })?,
    };
    let git_dir = git_dir.canonicalize().ok()?;
    let common = std::fs::read_to_string(git_dir.join("commondir"))
        .map(|c| git_dir.join(c.trim_end()))
        .unwrap_or_else(|_| git_dir.clone());
    let objects = std::env::var_os("GIT_OBJECT_DIRECTORY")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| common.join("objects"));
    Some(Found { git_dir, objects })
}

/// `p` as a git directory, or the one a `gitdir: PATH` file there names.
fn gitfile_or_dir(p: &Path) -> Option<PathBuf> {
    let m = std::fs::metadata(p).ok()?;
    if m.is_dir() {
        return is_git_dir(p).then(|| p.to_path_buf());
    }
    let text = std::fs::read_to_string(p).ok()?;
    let target = text.strip_prefix("gitdir:")?.trim();
    let dir = p.parent()?.join(target);
    is_git_dir(&dir).then_some(dir)
}

/// git's `is_git_directory`, roughly: HEAD, and objects or a common dir.
fn is_git_dir(d: &Path) -> bool {
    d.join("HEAD").is_file() && (d.join("objects").is_dir() || d.join("commondir").is_file())
}

/// Loose objects, estimated as `git gc --auto` does: the objects in
/// `objects/17`, times 256.
pub fn loose_estimate(objects: &Path) -> u64 {
    let n = std::fs::read_dir(objects.join("17"))
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    let n = e.file_name();
                    let n = n.as_encoded_bytes();
                    n.len() == 38 && n.iter().all(u8::is_ascii_hexdigit)
                })
                .count()
        })
        .unwrap_or(0);
    n as u64 * 256
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        let plain = Settled::default();
        assert!(!judge(&plain, 0).wrap);
        assert!(!judge(&plain, MANY_LOOSE).wrap);
        // Loose objects alone: per platform.
        let many = MANY_LOOSE + 256;
        let linux = judge_with(&plain, many, LINUX_LOOSE);
        assert!(!linux.wrap && linux.reason.starts_with("rule loose (linux)"));
        let macos = judge_with(&plain, many, MACOS_LOOSE);
        assert!(macos.wrap && macos.reason.starts_with("rule loose (macos)"));
        assert_eq!(judge(&plain, many).wrap, cfg!(target_os = "macos"));
        assert!(judge(&plain, 0).reason.starts_with("rule default"));
        let thrash = Settled {
            thrash: Some("core.packedGitLimit=32k (command line)".into()),
            ..Settled::default()
        };
        assert!(judge(&thrash, 0).wrap);
        assert!(judge_with(&thrash, MANY_LOOSE * 2, LINUX_LOOSE).wrap);
        assert!(judge(&thrash, 0).reason.starts_with("rule thrash"));
        let off = Settled {
            enable: Some((false, "~/.gitconfig:3".into())),
            ..thrash.clone()
        };
        assert!(!judge(&off, MANY_LOOSE * 2).wrap);
        let on = Settled {
            enable: Some((true, ".git/config:7".into())),
            ..Settled::default()
        };
        assert!(judge(&on, 0).wrap && judge(&on, 0).reason.contains(".git/config:7"));
        let broken = Settled {
            error: Some("fatal: detected dubious ownership".into()),
            ..on
        };
        assert!(!judge(&broken, 0).wrap);
    }
}
