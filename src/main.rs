//! `munmapq [OPTIONS] [--] COMMAND [ARGS...]`: runs COMMAND with libmunmapq
//! preloaded, its options passed as `MUNMAPQ_*` variables; or one of its
//! own words (help, version, doctor, selftest, shell-init, preload-env,
//! completions). Linked under another name it is that program's wrapper:
//! the git wrapper as `git` (git/), any other program as itself with the
//! library (linked.rs).

// munmapq has its own entry point, `main` below: see inherited::start.
// (Not in the unit tests, whose harness is their main.)
#![cfg_attr(not(test), no_main)]

// First: its print!/println!/eprint!/eprintln! replace std's in every
// module below (a closed pipe is not a panic).
#[macro_use]
mod out;

mod bench;
mod cli;
mod completions;
mod doctor;
mod git;
mod help;
mod inherited;
mod library;
mod linked;
mod macho;
mod platform;
mod program;
mod quote;
mod run;
mod seccomp;
mod selftest;
mod shell;
// Unwinding never happens with panic = "abort": std's references to the
// unwinder are answered here, so libgcc_s is not loaded (unwinder.rs).
#[cfg(all(
    not(test),
    panic = "abort",
    target_os = "linux",
    target_env = "gnu",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod unwinder;

use cli::{fail, parse_args, Parsed};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::ExitCode;

/// munmapq's own words, and the arguments each takes. A program of one of
/// these names runs with `munmapq -- NAME ARGS...`.
const WORDS: [(&str, &str); 8] = [
    ("help", " [WORD]"),
    ("version", ""),
    ("doctor", " COMMAND [ARGS...]"),
    ("selftest", " [--lib PATH]"),
    ("bench", " [OPTIONS] [--] COMMAND [ARGS...] | --seed"),
    ("shell-init", " bash|zsh|fish [COMMAND...]"),
    ("preload-env", " [bash|zsh|fish]"),
    ("completions", " bash|zsh|fish"),
];

/// Wrong arguments to one of munmapq's words: status 125, the usage, and
/// where that word's help is.
fn usage_error(word: &str) -> ExitCode {
    let args = WORDS.iter().find(|(w, _)| *w == word).map_or("", |w| w.1);
    eprintln!(
        "munmapq: usage: munmapq {word}{args} (to run a program named {word}: munmapq -- {word} ...)"
    );
    eprintln!("Try 'munmapq help {word}' for more information.");
    ExitCode::from(cli::OWN_FAILURE)
}

/// `munmapq preload-env`: refused where the library cannot go into every
/// program (macOS).
fn preload_env(shell: Option<&str>) -> ExitCode {
    match shell::preload_env(shell) {
        Ok(text) => out::emit(&text),
        Err(msg) => fail(&msg, cli::OWN_FAILURE),
    }
}

/// The program's entry, called by the C runtime in place of Rust's: it
/// does what Rust's would before `main` that munmapq needs
/// (inherited::start), and leaves out the rest, whose main-thread stack
/// guard alone (glibc's pthread_getattr_np reading /proc/self/maps) was a
/// fifth of the git wrapper's instructions before git's exec.
#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    inherited::start();
    let code = launcher();
    // Rust's runtime flushes stdout at exit; the C runtime does not know
    // Rust's buffer.
    use std::io::Write;
    let _ = std::io::stdout().lock().flush();
    (0..=255u8)
        .find(|&n| ExitCode::from(n) == code)
        .map_or(1, libc::c_int::from)
}

#[cfg_attr(test, allow(dead_code))]
fn launcher() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    // Linked as `git`, or called by shell-init's git function: the git
    // wrapper; linked as any other program: that program.
    match linked::link_name() {
        Some(name) if name == "git" => return git::wrap::run(&args, None),
        Some(name) => return linked::run(&name, &args),
        None => {}
    }
    if args.first().is_some_and(|a| a == "__git") {
        return git::wrap::run(&args[1..], Some(OsStr::new("git")));
    }
    let print = |r: Result<String, String>| match r {
        Ok(text) => out::emit(&text),
        Err(msg) => fail(&msg, cli::OWN_FAILURE),
    };
    let word = args.first().and_then(|a| a.to_str()).unwrap_or("");
    let rest: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // `munmapq WORD -h` / `--help`: that word's help; anywhere among the
    // arguments of a word that takes no option (shell-init's are command
    // names, never `--help`).
    let is_help = |a: &String| a == "-h" || a == "--help";
    if let Some(text) = help::word(word) {
        let anywhere = ["shell-init", "preload-env", "completions"].contains(&word);
        if matches!(rest.as_slice(), [flag] if is_help(flag))
            || anywhere && rest.iter().any(is_help)
        {
            return out::emit(text);
        }
    }
    match (word, rest.as_slice()) {
        ("help", []) => print(Ok(cli::usage())),
        ("help", [w]) => match help::topic(w) {
            Some(text) => out::emit(text),
            None => cli::usage_fail(&format!(
                "help: {} is not one of munmapq's words{}",
                quote::quote(&args[1]),
                cli::hint(w, &help::WORDS.map(|w| w.0), "")
            )),
        },
        ("version", []) => print(Ok(cli::version())),
        ("doctor", [dashes]) if dashes == "--" => usage_error(word),
        ("doctor", [_, ..]) => out::checked(ExitCode::from(doctor::run(&args[1..]))),
        ("bench", [_, ..]) => bench::run(&args[1..]),
        ("selftest", []) => out::checked(selftest::run(None)),
        ("selftest", [flag, path]) if flag == "--lib" => {
            out::checked(selftest::run(Some(PathBuf::from(path))))
        }
        ("shell-init", [shell, cmds @ ..]) => print(shell::shell_init(shell, cmds)),
        ("preload-env", []) => preload_env(None),
        ("preload-env", [shell]) if shell::SHELLS.contains(&shell.as_str()) => {
            preload_env(Some(shell))
        }
        ("completions", [shell]) => print(completions::script(shell)),
        ("__check", _) => selftest::child(&rest),
        (w, _) if WORDS.iter().any(|(name, _)| *name == w) => usage_error(w),
        _ => match parse_args(args) {
            Err(e) => e.report(),
            Ok(Parsed::Help) => print(Ok(cli::usage())),
            Ok(Parsed::Version) => print(Ok(cli::version())),
            Ok(Parsed::PrintLib(lib)) => match library::find_library(lib) {
                Ok(p) => {
                    let mut line = p.into_os_string().into_encoded_bytes();
                    line.push(b'\n');
                    out::emit_bytes(&line)
                }
                Err(e) => fail(&e.msg, cli::OWN_FAILURE),
            },
            Ok(Parsed::Run(o)) => run::run(o, git::check::stats_advice),
        },
    }
}
