//! When the cure is git's configuration, say so (as the seed's reviewers
//! did: the author withdrew his patch once he found `packedGitLimit = 128m`
//! in his ~/.gitconfig). git maps its packs in windows of
//! `core.packedGitWindowSize` and keeps at most `core.packedGitLimit` bytes
//! of them mapped (git's packfile.c, `use_pack` / `unuse_one_window`); when
//! its packs are larger than the limit, or the windows are tiny, it maps
//! and unmaps the same windows over and over. Defaults on 64-bit systems
//! (git's environment.h): 1 GiB windows, a 32 TiB limit.

use crate::git::repo::{git_prefix, last, repo, Entry, Repo};
use munmapq_core::config::parse_size;
use munmapq_core::stats::Counter;
use std::ffi::OsString;

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

/// One setting as git resolves it from the configuration entries.
fn setting(entries: &[Entry], key: &'static str) -> Option<Setting> {
    let e = last(entries, key)?;
    let raw = e.value.clone().unwrap_or_default();
    Some(Setting {
        key,
        bytes: parse_size(raw.trim().as_bytes())?,
        raw,
        origin: describe_origin(&e.origin, key),
    })
}

impl Packs {
    /// The packs of `repo` and git's window settings in `entries`.
    pub fn of(repo: &Repo, entries: &[Entry]) -> Packs {
        Packs {
            limit: setting(entries, "core.packedGitLimit"),
            window: setting(entries, "core.packedGitWindowSize"),
            sizes: repo.pack_sizes(),
        }
    }
}

/// The repository's packs and git's window settings, as `prefix` sees them.
pub fn packs(prefix: &[OsString]) -> Result<Packs, String> {
    let repo = repo(prefix)?;
    Ok(Packs::of(&repo, &repo.config(prefix)?))
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
        let cure = match culprits[0].origin.as_str() {
            "command line" => format!("leave out -c {}", culprits[0].key),
            _ => format!("git config --unset {} where it is set", culprits[0].key),
        };
        Some(format!(
            "git here has {} of packs (largest {}); with {} it maps and unmaps windows of {} \
             over and over (at most {} mapped at once); {}. The cure is the setting: \
             {}; munmapq only makes the thrashing cheaper.",
            mib(total),
            mib(self.largest()),
            names.join(" and "),
            mib(self.effective_window()),
            mib(self.limit_bytes().min(total)),
            self.default_would(),
            cure
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

/// For `--stats`: the advice when `command` was git and it thrashed.
pub fn stats_advice(
    command: &[OsString],
    report: &crate::run::report::Report,
) -> Option<crate::run::report::GitAdvice> {
    let packs = packs(&git_prefix(command)?).ok()?;
    let window_maps = report.get(Counter::Eligible);
    let text = packs.after_run(window_maps)?;
    Some(crate::run::report::GitAdvice {
        window_maps,
        window_bytes: packs.effective_window(),
        settings: packs
            .culprits()
            .iter()
            .map(|s| (s.key.to_string(), s.raw.clone(), s.origin.clone()))
            .collect(),
        text: text.trim_end().trim_start_matches("munmapq: ").to_string(),
    })
}

/// For `munmapq doctor git ...`: whether git, with the global options of
/// `command` (`-c`, `-C`, `--git-dir`, ...), would thrash its pack
/// windows, or why that was not checked (Err: git itself failed). None
/// when `command` is not git.
pub fn doctor_lines(command: &[OsString]) -> Option<Result<String, String>> {
    let prefix = git_prefix(command)?;
    if let Some(opt) = crate::git::repo::missing_value(&command[1..]) {
        return Some(Err(format!(
            "munmapq doctor: git {opt} needs a value (git would stop: \"option `{opt}' requires a value\")"
        )));
    }
    Some(match packs(&prefix) {
        Err(why) => Err(format!(
            "munmapq doctor: skipped the pack check, git here fails: {why}"
        )),
        Ok(p) => Ok(match p.advice() {
            Some(a) => format!("munmapq doctor: {a}"),
            None => format!(
                "munmapq doctor: git here: {} pack(s), {} in all; {} let git map them without thrashing",
                p.sizes.len(),
                mib(p.sizes.iter().sum()),
                [("core.packedGitLimit", &p.limit), ("core.packedGitWindowSize", &p.window)]
                    .iter()
                    .map(|(k, s)| s.as_ref().map_or(format!("{k} (default)"), named))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
        }),
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
    fn numbers_are_grouped() {
        assert_eq!(group(1400), "1,400");
    }
}
