//! The files a run writes besides the command's own, opened before it
//! starts (as `strace -o` does), so that a bad path is refused before
//! anything runs rather than losing the figures after: `--stats-out`, and
//! the files the caller names for the library (`MUNMAPQ_STATS_FILE`,
//! `MUNMAPQ_TRACE`), which the git wrapper checks alike.

use crate::cli::{Options, StatsOut};
use crate::out::why;
use crate::quote::quote_path;
use munmapq_core::config::{VAR_STATS_FILE, VAR_TRACE};
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Opens a file the library would append to (`MUNMAPQ_STATS_FILE`,
/// `MUNMAPQ_TRACE`) as it would: created 0600, appended to.
fn open_append(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
}

/// The files the settings name, opened before the command starts (as
/// `strace -o` does), so a bad path is refused before anything runs rather
/// than losing the figures after.
pub struct Outputs {
    /// `--stats-out FILE`: opened, not truncated until the command has
    /// started; `created`: it did not exist (removed if nothing runs).
    pub stats_out: Option<(File, PathBuf, bool)>,
    /// The caller's `MUNMAPQ_STATS_FILE`, under `--stats`: the command
    /// gets its own private file and this one what it collected.
    pub stats_file: Option<File>,
}

pub fn open_outputs(o: &Options) -> Result<Outputs, String> {
    let stats_out = match &o.stats_out {
        Some(StatsOut::File(p)) => {
            let existed = std::fs::symlink_metadata(p).is_ok();
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(p)
                .map_err(|e| format!("--stats-out {}: {}", quote_path(p), why(&e)))?;
            Some((f, p.clone(), !existed))
        }
        _ => None,
    };
    let mut stats_file = None;
    for (var, f) in inherited_files()? {
        if var == VAR_STATS_FILE && o.stats.is_some() {
            stats_file = Some(f);
        }
    }
    Ok(Outputs {
        stats_out,
        stats_file,
    })
}

/// The files the library appends to that the caller named
/// (`MUNMAPQ_STATS_FILE`, `MUNMAPQ_TRACE`), opened as the library opens
/// them, so that one that cannot be written is refused before anything
/// runs (one line naming the variable). A relative path is made absolute
/// against the current directory, in this process's environment: each
/// process of the command would open it again in its own directory (`git
/// -C repo` would put it in the repository). For the launcher and the git
/// wrapper, which exec or start the command next.
pub fn inherited_files() -> Result<Vec<(&'static str, File)>, String> {
    let mut files = Vec::new();
    for var in [VAR_STATS_FILE, VAR_TRACE] {
        let Some(p) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
            continue;
        };
        let mut path = PathBuf::from(&p);
        if path.is_relative() {
            let cwd = std::env::current_dir().map_err(|e| {
                format!(
                    "{var}={} (from the environment) is relative, and the current directory is unknown: {}",
                    quote_path(&path),
                    why(&e)
                )
            })?;
            path = cwd.join(path);
            // Single-threaded: the launcher and the git wrapper have not
            // started a thread.
            std::env::set_var(var, &path);
        }
        let f = open_append(&path).map_err(|e| {
            format!(
                "{var}={} (from the environment): {}",
                quote_path(&path),
                why(&e)
            )
        })?;
        files.push((var, f));
    }
    Ok(files)
}

/// Removes a `--stats-out` file this run created, when nothing ran.
pub fn discard(outputs: &Outputs) {
    if let Some((_, path, true)) = &outputs.stats_out {
        let _ = std::fs::remove_file(path);
    }
}
