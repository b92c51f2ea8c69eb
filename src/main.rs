//! `munmapq [OPTIONS] [--] COMMAND [ARGS...]`: runs COMMAND with libmunmapq
//! preloaded, its options passed as `MUNMAPQ_*` variables; or one of its
//! own words (help, version, doctor, selftest, shell-init, preload-env).

// First: its print!/println!/eprint!/eprintln! replace std's in every
// module below (a closed pipe is not a panic).
#[macro_use]
mod out;

mod cli;
mod doctor;
mod git;
mod library;
mod macho;
mod platform;
mod program;
mod run;
mod seccomp;
mod selftest;
mod shell;

use cli::{fail, parse_args, Parsed};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// munmapq's own words, and the arguments each takes. A program of one of
/// these names runs with `munmapq -- NAME ARGS...`.
const WORDS: [(&str, &str); 6] = [
    ("help", ""),
    ("version", ""),
    ("doctor", " COMMAND [ARGS...]"),
    ("selftest", " [--lib PATH]"),
    ("shell-init", " bash|zsh|fish [COMMAND...]"),
    ("preload-env", " [bash|zsh|fish]"),
];

/// Wrong arguments to one of munmapq's words: status 2, one line.
fn usage_error(word: &str) -> ExitCode {
    let args = WORDS.iter().find(|(w, _)| *w == word).map_or("", |w| w.1);
    fail(
        &format!(
            "usage: munmapq {word}{args} (to run a program named {word}: munmapq -- {word} ...)"
        ),
        2,
    )
}

/// `munmapq preload-env`: refused with status 1 where the library cannot
/// go into every program (macOS).
fn preload_env(shell: Option<&str>) -> ExitCode {
    match shell::preload_env(shell) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(msg) => fail(&msg, 1),
    }
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    // Linked as `git`, or called by shell-init's git function: the git wrapper.
    if git::locate::invoked_as_git() {
        return git::wrap::run(&args);
    }
    if args.first().is_some_and(|a| a == "__git") {
        return git::wrap::run(&args[1..]);
    }
    let print = |r: Result<String, String>| match r {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(msg) => fail(&msg, 2),
    };
    let word = args.first().and_then(|a| a.to_str()).unwrap_or("");
    let rest: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match (word, rest.as_slice()) {
        ("help", []) => print(Ok(cli::usage())),
        ("version", []) => print(Ok(cli::version())),
        ("doctor", [_, ..]) => ExitCode::from(doctor::run(&args[1..])),
        ("selftest", []) => selftest::run(None),
        ("selftest", [flag, path]) if flag == "--lib" => selftest::run(Some(PathBuf::from(path))),
        ("shell-init", [shell, cmds @ ..]) => print(shell::shell_init(shell, cmds)),
        ("preload-env", []) => preload_env(None),
        ("preload-env", [shell]) if shell::SHELLS.contains(&shell.as_str()) => {
            preload_env(Some(shell))
        }
        ("__check", _) => selftest::child(&rest),
        (w, _) if WORDS.iter().any(|(name, _)| *name == w) => usage_error(w),
        _ => match parse_args(args) {
            Err(msg) => fail(&msg, 2),
            Ok(Parsed::Exit(code)) => code,
            Ok(Parsed::PrintLib(lib)) => match library::find_library(lib) {
                Ok(p) => {
                    println!("{}", p.display());
                    ExitCode::SUCCESS
                }
                Err(msg) => fail(&msg, 1),
            },
            Ok(Parsed::Run(o)) => run::run(o, git::check::stats_line),
        },
    }
}
