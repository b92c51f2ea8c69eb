//! `munmapq doctor COMMAND`: would the library load into COMMAND, and if
//! not, why and what to do instead. Injection that silently does nothing is
//! the main way a preload tool fails its users.
//!
//! Facts are gathered per system (ELF headers on Linux; Mach-O headers and
//! `codesign` on macOS) and judged by pure functions, unit-tested on fake
//! facts.

mod facts;
pub mod launcher;
mod linux;
mod macos;
mod macos_facts;
#[cfg(target_os = "linux")]
mod secure;

use crate::macho;
#[cfg(target_os = "macos")]
use crate::macho::Host;
use crate::program::resolve;
use crate::quote::{quote, quote_path};
use facts::{file_facts, Facts, Verdict};
use linux::judge_linux;
use macos::judge_macos;
#[cfg(target_os = "macos")]
use macos_facts::{mach_o_facts, signing_facts};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A line on stdout; a closed pipe (`munmapq doctor git | head -1`) is
/// not an error worth a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        $crate::out::write_out(format_args!("{}\n", format_args!($($arg)*)));
    }};
}

#[cfg(target_os = "macos")]
fn platform_facts(f: &mut Facts) {
    f.host = Host::this();
    f.arm64e_preview_abi = macho::arm64e_preview_abi(&macho::bootargs());
    mach_o_facts(f);
    signing_facts(f);
    if let Ok(lib) = crate::library::find_library(None) {
        f.lib_archs = crate::platform::library_archs(&lib);
    }
}

#[cfg(not(target_os = "macos"))]
fn platform_facts(_f: &mut Facts) {}

pub fn judge(f: &Facts) -> Verdict {
    if cfg!(target_os = "macos") {
        judge_macos(f)
    } else {
        judge_linux(f)
    }
}

/// The program that really runs `path`: itself, the real git when `path`
/// is this munmapq linked as git, and on Linux the end of its `#!` chain
/// (the steps said on the way). Err: the exit status.
fn program_of(path: PathBuf) -> Result<PathBuf, u8> {
    let say = |line: &str| say!("munmapq doctor: {line}");
    let mut path = path;
    if crate::git::locate::is_me(&path) {
        let Some(real) = crate::git::locate::real_git() else {
            say(&format!(
                "{}: munmapq itself (the git wrapper), and there is no other git in PATH",
                quote_path(&path)
            ));
            return Err(127);
        };
        say(&format!(
            "{}: munmapq itself, linked as git: the git wrapper, which runs {}",
            quote_path(&path),
            quote_path(&real)
        ));
        path = real;
    }
    if !cfg!(target_os = "linux") {
        return Ok(path);
    }
    match crate::program::script::follow(&path) {
        Ok(chain) => {
            chain.steps.iter().for_each(|s| say(s));
            Ok(chain.program)
        }
        Err(e) => {
            say(&format!("{}; the library would NOT load", e.why));
            // As the launcher answers: a missing interpreter is not found.
            Err(if e.not_found { 127 } else { 1 })
        }
    }
}

/// Runs the doctor on `command` (a program and its arguments: `doctor git
/// -c ... log` reads git's options as git would); answers the exit status
/// (0: the library would load).
pub fn run(command: &[OsString]) -> u8 {
    // `doctor -- COMMAND`, as the launcher takes `munmapq -- COMMAND`.
    let command = match command {
        [dashes, rest @ ..] if dashes == "--" && !rest.is_empty() => rest,
        all => all,
    };
    let cmd = command[0].to_string_lossy();
    let Some(path) = resolve(&cmd) else {
        if cmd.contains('/') {
            if let Ok(m) = std::fs::metadata(&*cmd) {
                let what = if m.is_dir() {
                    "is a directory"
                } else {
                    "is not a regular file"
                };
                say!(
                    "munmapq doctor: {}: {what}, not a program",
                    quote(&command[0])
                );
                return 126;
            }
        }
        say!("munmapq doctor: {}: command not found", quote(&command[0]));
        return 127;
    };
    let program = match program_of(path.clone()) {
        Ok(p) => p,
        Err(status) => return status,
    };
    let mut f = match file_facts(&program) {
        Ok(f) => f,
        Err(e) => {
            say!("munmapq doctor: {}: {e}", quote_path(&program));
            return 126;
        }
    };
    platform_facts(&mut f);
    let mut git_failed = false;
    match crate::git::check::doctor_lines(command) {
        Some(Ok(advice)) => say!("{advice}"),
        Some(Err(why)) => {
            say!("{why}");
            git_failed = true;
        }
        None => {}
    }
    if Path::new(&*cmd).file_name().is_some_and(|n| n == "git") {
        for line in crate::git::wrap::doctor_lines(&command[1..]) {
            say!("munmapq doctor: {line}");
        }
    }
    let via_script = program != path && !crate::git::locate::is_me(&path);
    match judge(&f) {
        Verdict::Loads => {
            // The launcher refuses a library it cannot preload (an
            // `MUNMAPQ_LIB` the preload list would split, one that is
            // missing), or runs without one when no cache directory takes
            // its own: then nothing loads, whatever the program.
            if let Err(e) = crate::library::find_library(None) {
                say!(
                    "munmapq doctor: {}: the library would NOT load: {}",
                    quote_path(&program),
                    e.msg
                );
                return 1;
            }
            if let Ok(Some(note)) = crate::program::asan::judge(f.asan.as_ref(), f.asan_check_off) {
                say!("munmapq doctor: {}: {note}", quote_path(&program));
            }
            say!(
                "munmapq doctor: {}: the library would load (dynamically linked{}{}){}",
                quote_path(&program),
                f.interpreter
                    .as_deref()
                    .map(|i| format!(", {i}"))
                    .unwrap_or_default(),
                if f.mach_o {
                    format!(
                        ", {} into {}",
                        macho::names(&f.lib_archs),
                        macho::names(&f.archs)
                    )
                } else {
                    String::new()
                },
                if via_script {
                    ", and from there into the dynamically linked programs the script starts"
                } else {
                    ""
                }
            );
            if f.mach_o {
                say!("munmapq doctor: {}", macos::INTERPOSING_NOTE);
            }
            if git_failed {
                2
            } else {
                0
            }
        }
        Verdict::WontLoad(why, instead) => {
            say!(
                "munmapq doctor: {}: the library would NOT load: {why}",
                quote_path(&program)
            );
            say!("munmapq doctor: instead: {instead}");
            1
        }
    }
}

/// The launcher's prediction, before it execs `program` with `lib`: why the
/// library will not load into it (the doctor's verdict, read from the file
/// and, on Linux, the end of its `#!` chain), or None. A shared ASan
/// runtime is left to `asan::launcher_warning`, which says more.
pub fn predict(program: &Path, lib: &Path) -> Option<String> {
    if cfg!(target_os = "macos") {
        return launcher::would_kill(program, lib);
    }
    let end = crate::program::script::follow(program).ok()?.program;
    let f = file_facts(&end).ok()?;
    // A shared ASan runtime: asan.rs says it. A file that cannot be
    // executed, or whose dynamic linker is missing: the exec's own error
    // says why, alone.
    if f.asan.is_some() || !crate::program::may_execute(&end) || f.interpreter_missing {
        return None;
    }
    match judge(&f) {
        Verdict::Loads => None,
        Verdict::WontLoad(why, _) if end != program => Some(format!(
            "the library will not load into {}: {why}",
            quote_path(&end)
        )),
        Verdict::WontLoad(why, _) => Some(format!("the library will not load: {why}")),
    }
}
