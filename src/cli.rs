//! The command line: the options and their checks (with the `MUNMAPQ_*`
//! variables the command would inherit), and how a launcher error is
//! reported (status 125, as env, nice and timeout do). The texts are in
//! help.rs.

use crate::help::{USAGE, USAGE_END, USAGE_ENVIRONMENT};
use crate::quote::quote;
use munmapq_core::config::{self, System, VARIABLES};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;

pub struct Options {
    pub lib: Option<PathBuf>,
    pub stats: Option<StatsFormat>,
    /// Where the statistics go instead of stderr: a file, or stdout (`-`).
    pub stats_out: Option<StatsOut>,
    /// `-q`: no warning that the library will not load.
    pub quiet: bool,
    /// `MUNMAPQ_*` variables to set for the command.
    pub vars: Vec<(&'static str, OsString)>,
    pub command: Vec<OsString>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum StatsFormat {
    Short,
    Full,
    Json,
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub enum StatsOut {
    Stdout,
    File(PathBuf),
}

pub enum Parsed {
    Run(Options),
    PrintLib(Option<PathBuf>),
    /// `--help`.
    Help,
    Version,
}

/// munmapq's own failures: 125, as env, nice and timeout use.
pub const OWN_FAILURE: u8 = 125;

pub fn usage() -> String {
    let mut s = USAGE.to_string();
    s.push_str("\noptions:\n");
    for o in &crate::help::OPTIONS {
        let head = format!("  {:<20} ", o.synopsis());
        if head.len() > 23 {
            s.push_str(head.trim_end());
            s.push('\n');
            s.push_str(&wrap(&" ".repeat(23), o.help));
        } else {
            s.push_str(&wrap(&head, o.help));
        }
    }
    s.push_str(USAGE_ENVIRONMENT);
    for (var, accepts) in VARIABLES {
        s.push_str(&wrap(&format!("  {var:<20} "), accepts));
    }
    s.push_str(USAGE_END);
    s
}

/// `head` then `text` filled to 75 columns (80 in man, which indents
/// them 7 where --help indents them 2), continuation lines indented
/// as far as `head`.
fn wrap(head: &str, text: &str) -> String {
    let indent = " ".repeat(head.len());
    let mut out = String::new();
    let mut line = head.to_string();
    for word in text.split(' ') {
        if line.len() > indent.len() && line.len() + 1 + word.len() > 75 {
            out.push_str(line.trim_end());
            out.push('\n');
            line = indent.clone();
        }
        if line.len() > indent.len() && !line.ends_with(' ') {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// `munmapq --version`: the version, the commit a build from a checkout
/// was made of, and the built-in library's identity (the hash that also
/// names its cache directory), so that two builds never look alike.
pub fn version() -> String {
    let commit = match env!("MUNMAPQ_BUILT_FROM") {
        "" => String::new(),
        c => format!("commit {c}, "),
    };
    format!(
        "munmapq {} ({commit}built-in library {})\n",
        env!("CARGO_PKG_VERSION"),
        env!("MUNMAPQ_BUILT_IN_LIBRARY")
    )
}

/// A launcher error: one line, a conventional status.
pub fn fail(msg: &str, status: u8) -> ExitCode {
    eprintln!("munmapq: {msg}");
    ExitCode::from(status)
}

/// A wrong command line: the line, then where help is; status 125.
pub fn usage_fail(msg: &str) -> ExitCode {
    eprintln!("munmapq: {msg}");
    eprintln!("Try 'munmapq --help' for more information.");
    ExitCode::from(OWN_FAILURE)
}

/// What went wrong with the command line: a usage error (followed by
/// where help is) or a bad value from the environment (one line).
#[derive(Debug)]
pub enum BadArgs {
    Usage(String),
    Env(String),
}

impl BadArgs {
    pub fn report(&self) -> ExitCode {
        match self {
            BadArgs::Usage(m) => usage_fail(m),
            BadArgs::Env(m) => fail(m, OWN_FAILURE),
        }
    }
}

/// " (did you mean X?)" when `typed` is close to one of `candidates`.
pub fn hint(typed: &str, candidates: &[&str], prefix: &str) -> String {
    let close = crate::help::similar(typed, candidates);
    if close.is_empty() {
        return String::new();
    }
    let names: Vec<String> = close.iter().map(|c| format!("{prefix}{c}")).collect();
    format!(" (did you mean {}?)", names.join(" or "))
}

pub fn parse_args(args: Vec<OsString>) -> Result<Parsed, BadArgs> {
    let mut o = Options {
        lib: None,
        stats: None,
        stats_out: None,
        quiet: false,
        vars: Vec::new(),
        command: Vec::new(),
    };
    let mut print_lib = false;
    let mut it = args.into_iter();
    let usage = |m: String| BadArgs::Usage(m);
    while let Some(arg) = it.next() {
        let bytes = arg.as_bytes();
        if bytes.first() != Some(&b'-') || bytes == b"-" {
            o.command.push(arg);
            break;
        }
        // The name and an inline value as bytes: messages quote what is
        // not UTF-8 as a shell would ($'\xff'), never as U+FFFD.
        let (name, inline) = match bytes.iter().position(|&b| b == b'=') {
            Some(at) if bytes.starts_with(b"--") => (
                OsStr::from_bytes(&bytes[..at]),
                Some(OsStr::from_bytes(&bytes[at + 1..]).to_os_string()),
            ),
            _ => (arg.as_os_str(), None),
        };
        let Some(name) = name.to_str() else {
            return Err(usage(format!("unknown option {}", quote(&arg))));
        };
        let name = name.to_string();
        // An option that takes no value refuses one (`--disable=0` must
        // not disable).
        let flag = |what: &str| -> Result<(), BadArgs> {
            match &inline {
                Some(_) => Err(usage(format!(
                    "{name} takes no value ({} given){what}",
                    quote(&arg)
                ))),
                None => Ok(()),
            }
        };
        let mut value = |what: &str| -> Result<OsString, BadArgs> {
            inline
                .clone()
                .or_else(|| it.next())
                .filter(|v| !v.is_empty())
                .ok_or(usage(format!("{name} needs {what}")))
        };
        match name.as_str() {
            "--" => {
                flag("")?;
                break;
            }
            "-h" | "--help" => {
                flag("")?;
                return Ok(Parsed::Help);
            }
            "-V" | "--version" => {
                flag("")?;
                return Ok(Parsed::Version);
            }
            "--print-lib" => {
                flag("")?;
                print_lib = true
            }
            "-q" | "--quiet" => {
                flag("")?;
                o.quiet = true
            }
            "--stats" => {
                o.stats = Some(match inline.as_deref().map(|v| v.to_str()) {
                    None | Some(Some("short")) | Some(Some("text")) => StatsFormat::Short,
                    Some(Some("full")) => StatsFormat::Full,
                    Some(Some("json")) => StatsFormat::Json,
                    Some(_) => return Err(usage(format!("{}: accepts full or json", quote(&arg)))),
                })
            }
            "--lib" => o.lib = Some(PathBuf::from(value("a path")?)),
            "--stats-out" => {
                let v = value("a path (- for stdout)")?;
                o.stats_out = Some(if v == "-" {
                    StatsOut::Stdout
                } else {
                    StatsOut::File(PathBuf::from(v))
                });
                o.stats.get_or_insert(StatsFormat::Short);
            }
            // Checked as the library reads them (check_values), bytes.
            "--max-entries" => {
                let v = value("a number")?;
                o.vars.push((config::VAR_MAX_ENTRIES, v))
            }
            "--max-bytes" => {
                let v = value("a size")?;
                o.vars.push((config::VAR_MAX_BYTES, v))
            }
            "--evict" => {
                let v = value("aged, oldest or all")?;
                o.vars.push((config::VAR_EVICT, v))
            }
            "--no-reuse" => {
                flag(" (--no-reuse turns reuse off)")?;
                o.vars.push((config::VAR_REUSE, "0".into()))
            }
            "--disable" => {
                flag(" (--disable passes every call through)")?;
                o.vars.push((config::VAR_DISABLE, "1".into()))
            }
            _ => {
                return Err(usage(format!(
                    "unknown option {}{}",
                    quote(OsStr::new(&name)),
                    hint(&name, &crate::help::option_names(), "")
                )))
            }
        }
    }
    o.command.extend(it);
    check_values(&o.vars, |var| std::env::var_os(var))?;
    check_names(std::env::vars_os().map(|(k, _)| k))?;
    if print_lib {
        if let Some(extra) = o.command.first() {
            return Err(usage(format!(
                "--print-lib takes no command ({} given): usage: munmapq [--lib PATH] --print-lib",
                quote(extra)
            )));
        }
        return Ok(Parsed::PrintLib(o.lib));
    }
    if o.command.is_empty() {
        return Err(usage("no command given".into()));
    }
    Ok(Parsed::Run(o))
}

/// The `MUNMAPQ_*` variables the command would inherit, as the launcher
/// checks them before it starts a command with no option of its own (a
/// munmapq linked under a program's name).
pub fn check_environment() -> Result<(), BadArgs> {
    check_values(&[], |var| std::env::var_os(var))?;
    check_names(std::env::vars_os().map(|(k, _)| k))
}

/// Every `MUNMAPQ_*` name munmapq reads: the library's variables, the
/// launcher's library, the report directory it hands its children and
/// the git wrapper's recursion guard.
fn known_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = VARIABLES.iter().map(|(var, _)| *var).collect();
    v.extend([
        "MUNMAPQ_LIB",
        munmapq_core::config::VAR_STATS_DIR,
        crate::git::locate::GUARD_VAR,
    ]);
    v
}

/// The known names an unknown `MUNMAPQ_*` name looks like a misspelling
/// of: the same but for underscores and case, a few edits away, a part of
/// one (`MUNMAPQ_ENTRIES`) or one with more after it (`MUNMAPQ_LIBRARY`). A name like none of them (another tool's,
/// a test harness's) is left alone, as an unknown variable always is.
fn misspelt(name: &str) -> Vec<&'static str> {
    let norm = |s: &str| {
        s.strip_prefix("MUNMAPQ_")
            .unwrap_or(s)
            .replace('_', "")
            .to_ascii_lowercase()
    };
    let typed = norm(name);
    // Only the names a user sets are suggested (not the report directory
    // or the git wrapper's guard, which munmapq hands its children).
    let public = VARIABLES.iter().map(|(var, _)| *var).chain(["MUNMAPQ_LIB"]);
    let known: Vec<(String, &'static str)> = public.map(|k| (norm(k), k)).collect();
    let norms: Vec<&str> = known.iter().map(|(n, _)| n.as_str()).collect();
    let mut close = crate::help::similar(&typed, &norms);
    if close.is_empty() && typed.len() >= 3 {
        close = norms
            .iter()
            .copied()
            .filter(|n| n.contains(&typed) || typed.starts_with(n))
            .collect();
    }
    known
        .iter()
        .filter(|(n, _)| close.contains(&n.as_str()))
        .map(|(_, k)| *k)
        .collect()
}

/// Refuses a set `MUNMAPQ_*` variable whose name is a misspelling of one
/// munmapq reads: ignoring it would run the command without the setting
/// its author meant, as a mistyped option would.
fn check_names(names: impl Iterator<Item = OsString>) -> Result<(), BadArgs> {
    for name in names {
        let Some(n) = name.to_str().filter(|n| n.starts_with("MUNMAPQ_")) else {
            continue;
        };
        if known_names().contains(&n) || std::env::var_os(n).is_none_or(|v| v.is_empty()) {
            continue;
        }
        let close = misspelt(n);
        if !close.is_empty() {
            return Err(BadArgs::Env(format!(
                "{n} (from the environment) is not a munmapq variable (did you mean {}?); \
                 nothing was run",
                close.join(" or ")
            )));
        }
    }
    Ok(())
}

/// Validates the options' values, and the `MUNMAPQ_*` variables the
/// command would inherit (`env`) where no option replaces them, with the
/// library's own parser: the launcher refuses exactly what the library
/// would, before the command starts.
/// A value as messages show it: in double quotes where it is UTF-8, else
/// quoted as a shell would ($'\xff').
fn shown(v: &[u8]) -> String {
    match std::str::from_utf8(v) {
        Ok(s) => format!("{s:?}"),
        Err(_) => quote(OsStr::from_bytes(v)),
    }
}

fn check_values(
    vars: &[(&'static str, OsString)],
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<(), BadArgs> {
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
        return Err(BadArgs::Usage(format!(
            "{name} {} ({}): accepts {}",
            shown(value.as_bytes()),
            e.var,
            e.accepts
        )));
    }
    let value = get(e.var).unwrap_or_default();
    Err(BadArgs::Env(format!(
        "{}={} (from the environment) is not valid: it accepts {}; nothing was run",
        e.var,
        shown(value),
        e.accepts
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inherited_variables_are_checked_unless_an_option_replaces_them() {
        let env = |bad: &'static str| {
            move |var: &str| (var == config::VAR_EVICT).then(|| OsString::from(bad))
        };
        let msg = |e: BadArgs| match e {
            BadArgs::Usage(m) | BadArgs::Env(m) => m,
        };
        let err = msg(check_values(&[], env("lru")).unwrap_err());
        assert!(
            err.starts_with("MUNMAPQ_EVICT=\"lru\" (from the environment)"),
            "{err}"
        );
        assert!(err.contains("aged, oldest or all"), "{err}");
        // --evict replaces the variable for the command: not checked.
        assert!(check_values(&[(config::VAR_EVICT, "all".into())], env("lru")).is_ok());
        // An empty variable is the same as unset.
        assert!(check_values(&[], env("")).is_ok());
        let err =
            msg(check_values(&[(config::VAR_MAX_ENTRIES, "0".into())], |_| None).unwrap_err());
        assert!(err.starts_with("--max-entries \"0\""), "{err}");
    }

    #[test]
    fn misspelt_variables_are_told_from_others() {
        assert_eq!(misspelt("MUNMAPQ_MAXENTRIES"), ["MUNMAPQ_MAX_ENTRIES"]);
        assert_eq!(misspelt("MUNMAPQ_max_bytes"), ["MUNMAPQ_MAX_BYTES"]);
        assert_eq!(misspelt("MUNMAPQ_ENTRIES"), ["MUNMAPQ_MAX_ENTRIES"]);
        assert_eq!(misspelt("MUNMAPQ_DISABLED"), ["MUNMAPQ_DISABLE"]);
        assert_eq!(misspelt("MUNMAPQ_LIBRARY"), ["MUNMAPQ_LIB"]);
        for other in [
            "MUNMAPQ_TEST_LIB",
            "MUNMAPQ_TEST_LAUNCHER",
            "MUNMAPQ_BLESS",
            "MUNMAPQ_TEST_CONTROL",
            "MUNMAPQ_NESTED_CARGO",
        ] {
            assert!(misspelt(other).is_empty(), "{other}: {:?}", misspelt(other));
        }
    }
}
