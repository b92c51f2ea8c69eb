//! When the cure is git's configuration, say so (as the seed's reviewers
//! did: the author withdrew his patch once he found `packedGitLimit = 128m`
//! in his ~/.gitconfig). git maps its packs in windows of
//! `core.packedGitWindowSize` and keeps at most `core.packedGitLimit` bytes
//! of them mapped (git's packfile.c, `use_pack` / `unuse_one_window`); when
//! its packs are larger than the limit, or the windows are tiny, it maps
//! and unmaps the same windows over and over. Defaults on 64-bit systems
//! (git's environment.h): 1 GiB windows, a 32 TiB limit.

use munmapq_core::config::parse_size;
use munmapq_core::stats::Counter;
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

pub const DEFAULT_WINDOW: u64 = 1 << 30;
pub const DEFAULT_LIMIT: u64 = 32 << 40;
/// Windows below this are "tiny": git maps one per object it reads.
const TINY_WINDOW: u64 = 1 << 20;

/// One setting as git resolves it.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    pub key: &'static str,
    pub raw: String,
    pub bytes: u64,
    /// Where it comes from: `~/.gitconfig:3`, `command line`, ...
    pub origin: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Packs {
    pub limit: Option<Setting>,
    pub window: Option<Setting>,
    /// Sizes of the repository's packs, bytes.
    pub sizes: Vec<u64>,
}

/// git's global options in `command` (everything before the subcommand),
/// if `command` runs git: `git config` runs with the same ones, so it sees
/// the same repository and `-c` settings.
pub fn git_prefix(command: &[OsString]) -> Option<Vec<OsString>> {
    let prog = Path::new(command.first()?).file_name()?.to_str()?;
    if prog != "git" {
        return None;
    }
    let mut out = Vec::new();
    let mut args = command[1..].iter();
    while let Some(a) = args.next() {
        let s = a.to_str()?;
        if matches!(s, "-c" | "-C" | "--git-dir" | "--work-tree" | "--namespace") {
            out.push(a.clone());
            out.push(args.next()?.clone());
        } else if s.starts_with("--git-dir=")
            || s.starts_with("--work-tree=")
            || s.starts_with("--namespace=")
            || (s.starts_with("-c") && s.len() > 2)
        {
            out.push(a.clone());
        } else if s.starts_with('-') {
            continue;
        } else {
            break;
        }
    }
    Some(out)
}

fn git(prefix: &[OsString], args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(prefix)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `file:/home/me/.gitconfig` -> `~/.gitconfig:3` (the line that sets
/// `key`), `command line:` -> `command line`.
pub fn describe_origin(origin: &str, key: &str) -> String {
    let Some(path) = origin.strip_prefix("file:") else {
        return origin.trim_end_matches(':').to_string();
    };
    let name = key.rsplit('.').next().unwrap_or(key).to_ascii_lowercase();
    let line = std::fs::read_to_string(path).ok().and_then(|t| {
        t.lines()
            .position(|l| {
                let l = l.trim_start().to_ascii_lowercase();
                l.starts_with(&name) && l[name.len()..].trim_start().starts_with('=')
            })
            .map(|i| i + 1)
    });
    let home = std::env::var("HOME").unwrap_or_default();
    let shown = match path.strip_prefix(&home) {
        Some(rest) if !home.is_empty() && rest.starts_with('/') => format!("~{rest}"),
        _ => path.to_string(),
    };
    match line {
        Some(n) => format!("{shown}:{n}"),
        None => shown,
    }
}

fn setting(prefix: &[OsString], key: &'static str) -> Option<Setting> {
    let out = git(prefix, &["config", "--show-origin", "--get", key])?;
    let (origin, raw) = out.trim_end().split_once('\t')?;
    Some(Setting {
        key,
        raw: raw.to_string(),
        bytes: parse_size(raw.trim().as_bytes())?,
        origin: describe_origin(origin, key),
    })
}

/// The repository's packs and git's window settings, as `prefix` sees them.
pub fn packs(prefix: &[OsString]) -> Option<Packs> {
    let dir = git(
        prefix,
        &[
            "rev-parse",
            "--path-format=absolute",
            "--git-path",
            "objects/pack",
        ],
    )?;
    let sizes = std::fs::read_dir(dir.trim())
        .ok()?
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .collect();
    Some(Packs {
        limit: setting(prefix, "core.packedGitLimit"),
        window: setting(prefix, "core.packedGitWindowSize"),
        sizes,
    })
}

fn mib(n: u64) -> String {
    if n >= 1 << 30 && n.is_multiple_of(1 << 30) {
        format!("{} GiB", n >> 30)
    } else if n >= 1 << 20 {
        format!("{} MiB", (n + (1 << 19)) >> 20)
    } else {
        format!("{} KiB", (n + 512) >> 10)
    }
}

fn named(s: &Setting) -> String {
    format!("{}={} ({})", s.key, s.raw, s.origin)
}

impl Packs {
    fn window_bytes(&self) -> u64 {
        self.window.as_ref().map_or(DEFAULT_WINDOW, |s| s.bytes)
    }
    fn limit_bytes(&self) -> u64 {
        self.limit.as_ref().map_or(DEFAULT_LIMIT, |s| s.bytes)
    }
    fn largest(&self) -> u64 {
        self.sizes.iter().copied().max().unwrap_or(0)
    }
    /// The window git really maps: no longer than the pack.
    pub fn effective_window(&self) -> u64 {
        self.window_bytes().min(self.largest()).max(1)
    }

    /// The settings that make git thrash here, if any: a limit that holds
    /// fewer windows than the packs need (git keeps at least one mapped,
    /// so a single window covering a single pack never thrashes), or tiny
    /// windows on a larger pack.
    pub fn culprits(&self) -> Vec<&Setting> {
        let w = self.effective_window();
        let needed: u64 = self.sizes.iter().map(|s| s.div_ceil(w)).sum();
        let fit = (self.limit_bytes() / w).max(1);
        let mut v = Vec::new();
        if let Some(l) = &self.limit {
            if needed > fit {
                v.push(l);
            }
        }
        if let Some(w) = &self.window {
            if w.bytes < TINY_WINDOW && self.largest() > w.bytes {
                v.push(w);
            }
        }
        v
    }

    /// What git's defaults would do with these packs.
    pub fn default_would(&self) -> String {
        let largest = self.largest();
        let what = if self.sizes.len() == 1 {
            format!("this {} pack", mib(largest))
        } else {
            format!("these {} packs", self.sizes.len())
        };
        if largest <= DEFAULT_WINDOW {
            format!("git's defaults would map {what} once")
        } else {
            format!(
                "git's defaults would map {what} in {} windows of 1 GiB, each once",
                largest.div_ceil(DEFAULT_WINDOW)
            )
        }
    }

    /// The advice before a run (`munmapq doctor git`), or None.
    pub fn advice(&self) -> Option<String> {
        let culprits = self.culprits();
        if culprits.is_empty() {
            return None;
        }
        let total: u64 = self.sizes.iter().sum();
        let names: Vec<String> = culprits.iter().map(|s| named(s)).collect();
        Some(format!(
            "git here has {} of packs (largest {}); with {} it maps and unmaps windows of {} \
             over and over (at most {} mapped at once); {}. The cure is the setting: \
             git config --unset {} where it is set; munmapq only makes the thrashing cheaper.",
            mib(total),
            mib(self.largest()),
            names.join(" and "),
            mib(self.effective_window()),
            mib(self.limit_bytes().min(total)),
            self.default_would(),
            culprits[0].key
        ))
    }

    /// The line `--stats` ends with when git thrashed under munmapq.
    pub fn after_run(&self, window_maps: u64) -> Option<String> {
        let culprits = self.culprits();
        let windows_needed: u64 = self
            .sizes
            .iter()
            .map(|s| s.div_ceil(self.effective_window()))
            .sum();
        if culprits.is_empty() || window_maps <= 2 * windows_needed.max(1) {
            return None;
        }
        let names: Vec<String> = culprits.iter().map(|s| named(s)).collect();
        Some(format!(
            "munmapq: {} window maps of {} under {}; {}\n",
            group(window_maps),
            mib(self.effective_window()),
            names.join(" and "),
            self.default_would()
        ))
    }
}

fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// For `--stats`: the closing line when `command` was git and it thrashed.
pub fn stats_line(command: &[OsString], report: &crate::report::Report) -> String {
    git_prefix(command)
        .and_then(|p| packs(&p))
        .and_then(|p| p.after_run(report.get(Counter::Eligible)))
        .unwrap_or_default()
}

/// For `munmapq doctor git`: the advice about the repository in the
/// current directory, if any.
pub fn doctor_lines(command: &[OsString]) -> Option<String> {
    if Path::new(command.first()?).file_name()? != "git" {
        return None;
    }
    let p = packs(&[])?;
    Some(match p.advice() {
        Some(a) => format!("munmapq doctor: {a}"),
        None => format!(
            "munmapq doctor: git here: {} pack(s), {} in all; core.packedGitLimit and \
             core.packedGitWindowSize let git map them without thrashing",
            p.sizes.len(),
            mib(p.sizes.iter().sum())
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(key: &'static str, raw: &str, origin: &str) -> Setting {
        Setting {
            key,
            raw: raw.into(),
            bytes: parse_size(raw.as_bytes()).unwrap(),
            origin: origin.into(),
        }
    }

    #[test]
    fn seed_configuration_is_named() {
        let p = Packs {
            limit: Some(s("core.packedGitLimit", "128m", "~/.gitconfig:3")),
            window: None,
            sizes: vec![4 << 30],
        };
        assert_eq!(p.culprits().len(), 1);
        let line = p.after_run(3_072_538).unwrap();
        assert!(line.contains("3,072,538 window maps of 1 GiB"), "{line}");
        assert!(
            line.contains("core.packedGitLimit=128m (~/.gitconfig:3)"),
            "{line}"
        );
        assert!(line.contains("4 windows of 1 GiB, each once"), "{line}");
        assert!(p
            .advice()
            .unwrap()
            .contains("git config --unset core.packedGitLimit"));
        let fine = Packs {
            limit: None,
            window: None,
            sizes: vec![500 << 20],
        };
        assert!(fine.advice().is_none() && fine.after_run(10).is_none());
        let tiny = Packs {
            limit: None,
            window: Some(s("core.packedGitWindowSize", "16k", "command line")),
            sizes: vec![16 << 20],
        };
        assert!(tiny.advice().unwrap().contains("windows of 16 KiB"));
    }

    #[test]
    fn global_options_are_kept() {
        let cmd: Vec<OsString> = [
            "/usr/bin/git",
            "-C",
            "r",
            "-c",
            "a=b",
            "--no-pager",
            "log",
            "-c",
            "x",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let p = git_prefix(&cmd).unwrap();
        assert_eq!(p, ["-C", "r", "-c", "a=b"].map(OsString::from));
        assert!(git_prefix(&[OsString::from("ls")]).is_none());
        assert_eq!(group(1400), "1,400");
    }
}
