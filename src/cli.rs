//! The command line: the usage text, the options and their checks, and
//! how a launcher error is reported.

use munmapq_core::config::{self, System, VARIABLES};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

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
       munmapq env                the variables to preload the library by hand
       munmapq --print-lib        the library's path

Runs COMMAND with libmunmapq preloaded (LD_PRELOAD on Linux, DYLD_INSERT_LIBRARIES
on macOS, prepended to what is already there); child processes inherit it. The exit
status and signals of COMMAND are passed through. After COMMAND exits, munmapq warns
if no process of it loaded the library (static or setuid programs cannot);
`munmapq doctor COMMAND` says why. (To run a program called doctor, env or
shell-init: munmapq -- doctor.)

options:
  --stats[=text|json]  print counters summed over COMMAND and its children, on stderr
  --stats-out PATH     write them to PATH instead (implies --stats; for scripts)
  --max-entries N      most mappings queued at once (MUNMAPQ_MAX_ENTRIES)
  --max-bytes SIZE     a fixed cap on the length queued, e.g. 64M (MUNMAPQ_MAX_BYTES;
                       default: none, the queue is bounded by the memory it keeps
                       resident: a quarter of the program's RSS, at least 4 MiB)
  --no-reuse           never hand a queued mapping back to a matching mmap (MUNMAPQ_REUSE=0)
  --evict aged|oldest|all  on overflow unmap the oldest with their old touching neighbours, down
                       to 15/16 (aged, default); the oldest with its whole run, down to 3/4; or all
  --disable            load the library but pass every call through (MUNMAPQ_DISABLE=1)
  --lib PATH           use this libmunmapq (default: $MUNMAPQ_LIB, else next to munmapq)
  --print-lib          print the library's path and exit
  -h, --help           this text
  -V, --version        the version

environment variables read by the library (set them yourself with raw LD_PRELOAD):
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
    Text,
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
    s
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
                .ok_or(format!("{name} needs {what}"))
        };
        match name.as_str() {
            "--" => break,
            "-h" | "--help" => {
                print!("{}", usage());
                return Ok(Parsed::Exit(ExitCode::SUCCESS));
            }
            "-V" | "--version" => {
                println!("munmapq {}", env!("CARGO_PKG_VERSION"));
                return Ok(Parsed::Exit(ExitCode::SUCCESS));
            }
            "--print-lib" => print_lib = true,
            "--stats" => {
                o.stats = Some(match inline.as_deref() {
                    None | Some("text") => StatsFormat::Text,
                    Some("json") => StatsFormat::Json,
                    Some(v) => return Err(format!("--stats={v}: accepts text or json")),
                })
            }
            "--lib" => o.lib = Some(PathBuf::from(value("a path")?)),
            "--stats-out" => {
                o.stats_out = Some(PathBuf::from(value("a path")?));
                o.stats.get_or_insert(StatsFormat::Text);
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
    check_values(&o.vars)?;
    if print_lib {
        return Ok(Parsed::PrintLib(o.lib));
    }
    if o.command.is_empty() {
        return Err("no command given (see munmapq --help)".into());
    }
    Ok(Parsed::Run(o))
}

/// Validates option values with the library's own parser, so the launcher
/// refuses exactly what the library would.
fn check_values(vars: &[(&'static str, String)]) -> Result<(), String> {
    let sys = System {
        max_map_count: None,
        address_space_limit: None,
    };
    config::parse(sys, |var| {
        vars.iter()
            .rev()
            .find(|(k, _)| *k == var)
            .map(|(_, v)| v.as_bytes())
    })
    .map(drop)
    .map_err(|e| {
        let value = vars
            .iter()
            .rev()
            .find(|(k, _)| *k == e.var)
            .map(|(_, v)| v.as_str());
        let option = match e.var {
            config::VAR_MAX_ENTRIES => "--max-entries",
            config::VAR_MAX_BYTES => "--max-bytes",
            config::VAR_EVICT => "--evict",
            _ => "option",
        };
        format!(
            "{option} {:?} ({}): accepts {}",
            value.unwrap_or(""),
            e.var,
            e.accepts
        )
    })
}
