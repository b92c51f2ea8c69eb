//! `munmapq [OPTIONS] [--] COMMAND [ARGS...]`: runs COMMAND with libmunmapq
//! preloaded, its options passed as `MUNMAPQ_*` variables.

mod asan;
mod cli;
mod doctor;
mod elf;
mod embedded;
mod gitcache;
mod gitcheck;
mod gitdecide;
mod gitrepo;
mod gitwrap;
mod library;
mod macho;
mod platform;
mod program;
mod report;
mod run;
mod script;
mod selftest;
mod shell;

use cli::{fail, parse_args, Parsed};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    // Linked as `git`, or called by shell-init's git function: the git wrapper.
    if gitwrap::invoked_as_git() {
        return gitwrap::run(&args);
    }
    if args.first().is_some_and(|a| a == "__git") {
        return gitwrap::run(&args[1..]);
    }
    let print = |r: Result<String, String>| match r {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(msg) => fail(&msg, 2),
    };
    match args.first().and_then(|a| a.to_str()) {
        Some("shell-init") => {
            let rest: Vec<String> = args[1..]
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            return match rest.split_first() {
                Some((shell, cmds)) => print(shell::shell_init(shell, cmds)),
                None => fail("shell-init needs a shell: bash, zsh or fish", 2),
            };
        }
        Some("env") if args.len() == 1 => return print(shell::env()),
        _ => {}
    }
    match args.first().and_then(|a| a.to_str()) {
        Some("__check") => {
            let rest: Vec<String> = args[1..]
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            return selftest::child(&rest);
        }
        Some("selftest") => {
            return match args.get(1..).unwrap_or_default() {
                [] => selftest::run(None),
                [flag, path] if flag == "--lib" => selftest::run(Some(PathBuf::from(path))),
                _ => fail("usage: munmapq selftest [--lib PATH]", 2),
            }
        }
        _ => {}
    }
    if args.first().is_some_and(|a| a == "doctor") {
        return match args.get(1..).filter(|c| !c.is_empty()) {
            Some(command) => ExitCode::from(doctor::run(command)),
            None => fail("doctor needs a command (munmapq doctor COMMAND)", 2),
        };
    }
    match parse_args(args) {
        Err(msg) => fail(&msg, 2),
        Ok(Parsed::Exit(code)) => code,
        Ok(Parsed::PrintLib(lib)) => match library::find_library(lib) {
            Ok(p) => {
                println!("{}", p.display());
                ExitCode::SUCCESS
            }
            Err(msg) => fail(&msg, 1),
        },
        Ok(Parsed::Run(o)) => run::run(o),
    }
}
