//! `munmapq shell-init` in the shells it writes for (bash, zsh, fish; a
//! shell that is not installed is said and skipped): `--help` anywhere is
//! help, never a function named `--help`; a `git` function the user
//! already has (fish: also an alias) is kept and said, one of munmapq's
//! own is replaced; and `doctor git` says what it cannot see of a shell.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::process::Command;

fn has(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The installed shells, each with how it loads shell-init's output.
fn shells() -> Vec<(&'static str, String)> {
    let m = launcher().display().to_string();
    let mut v = Vec::new();
    for sh in ["bash", "zsh", "fish"] {
        if !has(sh) {
            println!("{sh}: not installed, not checked");
            continue;
        }
        let load = if sh == "fish" {
            format!("'{m}' shell-init fish | source")
        } else {
            format!("eval \"$('{m}' shell-init {sh})\"")
        };
        v.push((sh, load));
    }
    v
}

#[test]
fn help_and_version_are_no_command_names() {
    for sh in ["bash", "zsh", "fish"] {
        for flag in ["--help", "-h"] {
            let out = output_within(
                Command::new(launcher()).args(["shell-init", sh, flag]),
                MINUTE,
            );
            let o = text(&out.stdout);
            assert!(out.status.success(), "{sh} {flag}");
            assert!(
                o.starts_with("usage: munmapq shell-init") && !o.contains("function -"),
                "{sh} {flag}: {o}"
            );
        }
        for args in [&["--version"][..], &["git", "-V"], &["-x"]] {
            let out = output_within(
                Command::new(launcher()).args(["shell-init", sh]).args(args),
                MINUTE,
            );
            assert_eq!(out.status.code(), Some(125), "{sh} {args:?}");
            assert!(
                out.stdout.is_empty(),
                "{sh} {args:?}: {}",
                text(&out.stdout)
            );
            assert_contains(&out.stderr, "is not a command name");
        }
    }
    println!("shell-init SHELL --help: the help; --version, -V, -x: refused (125)");
}

#[test]
fn a_git_function_of_the_users_is_kept_and_said() {
    for (sh, load) in shells() {
        let mut users = vec![("function", "git() { echo mine \"$@\"; }")];
        if sh == "fish" {
            users = vec![
                ("function", "function git; echo mine $argv; end"),
                // fish's aliases are functions.
                ("alias", "alias git='echo mine'"),
            ];
        }
        for (what, define) in users {
            let script = format!("{define}\n{load}\ngit x\n");
            let out = output_within(Command::new(sh).args(["-c", &script]), MINUTE);
            let (o, e) = (text(&out.stdout), text(&out.stderr));
            assert_eq!(
                o, "mine x\n",
                "{sh} {what}: the user's git was replaced: {e}"
            );
            assert!(
                e.contains("git is already a shell function here") && e.contains("kept it"),
                "{sh} {what}: not said: {e}"
            );
            assert_eq!(e.lines().count(), 1, "{sh} {what}: {e}");
        }
        // munmapq's own, evaluated twice (a second ~/.bashrc read): replaced
        // without a word, and git runs.
        let script = format!("{load}\n{load}\ngit --version\n");
        let out = output_within(Command::new(sh).args(["-c", &script]), MINUTE);
        let (o, e) = (text(&out.stdout), text(&out.stderr));
        assert!(
            o.starts_with("git version") && e.is_empty(),
            "{sh}: {o} {e}"
        );
    }
    println!("a git function of the user's (fish: and an alias): kept, in one line on stderr");
}

#[test]
fn doctor_git_says_what_it_cannot_see() {
    // Run from a shell that has the function: doctor, a program, cannot
    // see it, and must not tell the user to install what they have.
    let Some((sh, load)) = shells().into_iter().next() else {
        return;
    };
    let m = launcher().display().to_string();
    let script = format!("{load}\n'{m}' doctor git\n");
    let out = output_within(Command::new(sh).args(["-c", &script]), MINUTE);
    let o = text(&out.stdout);
    assert!(o.contains("munmapq cannot see from here"), "{o}");
    assert!(o.contains("type git"), "{o}");
    assert!(
        !o.contains("gives interactive shells a git function"),
        "{o}"
    );
    println!("doctor git, under shell-init's function: says what it cannot see, and how to look");
}
