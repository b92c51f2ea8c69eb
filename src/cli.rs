//! The command line: the usage text, the options and their checks (with
//! the `MUNMAPQ_*` variables the command would inherit), and how a
//! launcher error is reported.

use munmapq_core::config::{self, System, VARIABLES};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;

/// `--help`, and the man page (munmapq.1 is generated from this text and a
/// test checks it still is: tests/manpage.rs). A line ending in `:` starts
/// a section; indented lines are kept as they are.
const USAGE: &str = "\
munmapq: defer and reuse the munmap()s of read-only file mappings in an unmodified program

usage: munmapq [OPTIONS] [--] COMMAND [ARGS...]
       munmapq selftest [--lib PATH]
                                  does the library load and behave here? (run it first;
                                  prints a report to paste into a bug report)
       munmapq doctor COMMAND     would the library load into COMMAND? why not?
                                  (doctor git, in a repository: do its settings make git thrash?)
       munmapq shell-init bash|zsh|fish [COMMAND...]
                                  shell functions that run COMMANDs (default: git)
                                  through munmapq: eval \"$(munmapq shell-init bash)\"
       munmapq preload-env [bash|zsh|fish]
                                  the variable that preloads the library into everything
                                  a shell starts: eval \"$(munmapq preload-env)\"
       munmapq help | version     this text | the version
       munmapq --print-lib        the library's path

Runs COMMAND with libmunmapq preloaded (LD_PRELOAD on Linux, DYLD_INSERT_LIBRARIES
on macOS, prepended to what is already there); child processes inherit it. Signals
another process sends to munmapq are passed on to COMMAND; signals the caller ignored
stay ignored. After COMMAND exits, munmapq warns if no process of it loaded the
library (static or setuid programs cannot); `munmapq doctor COMMAND` says why.

help, version, doctor, selftest, shell-init and preload-env are munmapq's own words: to
run a program of one of these names, write munmapq -- NAME [ARGS...].

options:
  --stats[=full|json]  after COMMAND, on stderr: a summary of what was saved (counters
                       summed over COMMAND and its children), every counter (full), or
                       one JSON object (json)
  --stats-out PATH     write them to PATH instead (implies --stats; created before COMMAND runs)
  --max-entries N      most mappings queued at once (MUNMAPQ_MAX_ENTRIES)
  --max-bytes SIZE     a fixed cap on the length queued, in bytes or with a K, M, G or T
                       suffix, e.g. 64M (MUNMAPQ_MAX_BYTES; default: none, the queue is
                       bounded by the memory it keeps resident: a quarter of the
                       program's RSS, at least 4 MiB)
  --no-reuse           never hand a queued mapping back to a matching mmap (MUNMAPQ_REUSE=0)
  --evict aged|oldest|all  on overflow unmap the oldest with their old touching neighbours, down
                       to 15/16 (aged, default); the oldest with its whole run, down to 3/4; or all
  --disable            load the library but pass every call through (MUNMAPQ_DISABLE=1)
  --lib PATH           use this libmunmapq (default: $MUNMAPQ_LIB, else next to munmapq,
                       else the one built into munmapq)
  --print-lib          print the library's path and exit
  -h, --help           this text
  -V, --version        the version

environment:
  Variables read by the library (set them yourself with raw LD_PRELOAD); munmapq checks
  those COMMAND would inherit before it starts it, and an empty one counts as unset.
";

/// Appended after the variables.
const USAGE_END: &str = "
files:
  The library built into munmapq is written once, for munmapq to preload, to
  $XDG_CACHE_HOME/munmapq (if that is an absolute path), else ~/.cache/munmapq, else
  $TMPDIR/munmapq-UID (/tmp by default): the first of them this user can write to,
  in directories that belong to the user and nobody else can write to. Versions no
  munmapq has used for 30 days are removed from there.

exit status:
  COMMAND's own; if a signal killed COMMAND, munmapq kills itself with the same signal
  1    munmapq could not prepare the run (no usable library, no statistics file)
  2    a bad option, subcommand argument or MUNMAPQ_* variable: nothing was run
  126  COMMAND cannot be run
  127  COMMAND not found
";

pub struct Options {
    pub lib: Option<PathBuf>,
    pub stats: Option<StatsFormat>,
    /// Where the statistics go instead of stderr.
    pub stats_out: Option<PathBuf>,
    /// `MUNMAPQ_*` variables to set for the command.
    pub vars: Vec<(&'static str, String)>,
    pub command: Vec<OsString>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum StatsFormat {
    Short,
    Full,
    Json,
}

pub enum Parsed {
    Run(Options),
    PrintLib(Option<PathBuf>),
    Exit(ExitCode),
}

pub fn usage() -> String {
    let mut s = USAGE.to_string();
    for (var, accepts) in VARIABLES {
        s.push_str(&format!("  {var:<20} {accepts}\n"));
    }
    s.push_str(USAGE_END);
    s
}

pub fn version() -> String {
    format!("munmapq {}\n", env!("CARGO_PKG_VERSION"))
}

/// A launcher error: one line, a conventional status.
pub fn fail(msg: &str, status: u8) -> ExitCode {
    eprintln!("munmapq: {msg}");
    ExitCode::from(status)
}

pub fn parse_args(args: Vec<OsString>) -> Result<Parsed, String> {
    let mut o = Options {
        lib: None,
        stats: None,
        stats_out: None,
        vars: Vec::new(),
        command: Vec::new(),
    };
    let mut print_lib = false;
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let Some(a) = arg.to_str().filter(|a| a.starts_with('-')) else {
            o.command.push(arg);
            break;
        };
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (a.to_string(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().and_then(|v| v.into_string().ok()))
                .filter(|v| !v.is_empty())
                .ok_or(format!("{name} needs {what}"))
        };
        match name.as_str() {
            "--" => break,
            "-h" | "--help" => {
                print!("{}", usage());
                return Ok(Parsed::Exit(ExitCode::SUCCESS));
            }
            "-V" | "--version" => {
                print!("{}", version());
                return Ok(Parsed::Exit(ExitCode::SUCCESS));
            }
            "--print-lib" => print_lib = true,
            "--stats" => {
                o.stats = Some(match inline.as_deref() {
                    None | Some("short") | Some("text") => StatsFormat::Short,
                    Some("full") => StatsFormat::Full,
                    Some("json") => StatsFormat::Json,
                    Some(v) => return Err(format!("--stats={v}: accepts full or json")),
                })
            }
            "--lib" => o.lib = Some(PathBuf::from(value("a path")?)),
            "--stats-out" => {
                o.stats_out = Some(PathBuf::from(value("a path")?));
                o.stats.get_or_insert(StatsFormat::Short);
            }
            "--max-entries" => o.vars.push((config::VAR_MAX_ENTRIES, value("a number")?)),
            "--max-bytes" => o.vars.push((config::VAR_MAX_BYTES, value("a size")?)),
            "--evict" => o
                .vars
                .push((config::VAR_EVICT, value("aged, oldest or all")?)),
            "--no-reuse" => o.vars.push((config::VAR_REUSE, "0".into())),
            "--disable" => o.vars.push((config::VAR_DISABLE, "1".into())),
            _ => return Err(format!("unknown option {a} (see munmapq --help)")),
        }
    }
    o.command.extend(it);
    check_values(&o.vars, |var| std::env::var_os(var))?;
    if print_lib {
        if let Some(extra) = o.command.first() {
            return Err(format!(
                "--print-lib takes no command ({:?} given): usage: munmapq [--lib PATH] --print-lib",
                extra
            ));
        }
        return Ok(Parsed::PrintLib(o.lib));
    }
    if o.command.is_empty() {
        return Err("no command given (see munmapq --help)".into());
    }
    Ok(Parsed::Run(o))
}

/// Validates the options' values, and the `MUNMAPQ_*` variables the
/// command would inherit (`env`) where no option replaces them, with the
/// library's own parser: the launcher refuses exactly what the library
/// would, before the command starts.
fn check_values(
    vars: &[(&'static str, String)],
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<(), String> {
    let sys = System {
        max_map_count: None,
        address_space_limit: None,
    };
    let option = |var: &str| vars.iter().rev().find(|(k, _)| *k == var);
    let inherited: Vec<(&'static str, OsString)> = VARIABLES
        .iter()
        .filter(|(var, _)| option(var).is_none())
        .filter_map(|&(var, _)| env(var).map(|v| (var, v)))
        .collect();
    let get = |var: &'static str| -> Option<&[u8]> {
        match option(var) {
            Some((_, v)) => Some(v.as_bytes()),
            None => inherited
                .iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| v.as_bytes()),
        }
    };
    let e = match config::parse(sys, get) {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    if let Some((_, value)) = option(e.var) {
        let name = match e.var {
            config::VAR_MAX_ENTRIES => "--max-entries",
            config::VAR_MAX_BYTES => "--max-bytes",
            config::VAR_EVICT => "--evict",
            _ => "option",
        };
        return Err(format!(
            "{name} {value:?} ({}): accepts {}",
            e.var, e.accepts
        ));
    }
    let value = get(e.var).unwrap_or_default();
    Err(format!(
        "{}={:?} (from the environment) is not valid: it accepts {}; nothing was run",
        e.var,
        String::from_utf8_lossy(value),
        e.accepts
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inherited_variables_are_checked_unless_an_option_replaces_them() {
        let env = |bad: &'static str| {
            move |var: &str| (var == config::VAR_EVICT).then(|| OsString::from(bad))
        };
        let err = check_values(&[], env("lru")).unwrap_err();
        assert!(
            err.starts_with("MUNMAPQ_EVICT=\"lru\" (from the environment)"),
            "{err}"
        );
        assert!(err.contains("aged, oldest or all"), "{err}");
        // --evict replaces the variable for the command: not checked.
        assert!(check_values(&[(config::VAR_EVICT, "all".into())], env("lru")).is_ok());
        // An empty variable is the same as unset.
        assert!(check_values(&[], env("")).is_ok());
        let err = check_values(&[(config::VAR_MAX_ENTRIES, "0".into())], |_| None).unwrap_err();
        assert!(err.starts_with("--max-entries \"0\""), "{err}");
    }
}
