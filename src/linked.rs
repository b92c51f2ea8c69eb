//! munmapq linked under another program's name (`ln -s "$(command -v
//! munmapq)" ~/bin/make`), as eatmydata's symlink mode: the next program
//! of that name in the search path, past this munmapq and every wrapper
//! already passed, runs with the library, its arguments all its own (none
//! is read as munmapq's). Linked as `git` it is the git wrapper instead
//! (git/wrap.rs), which turns munmapq on only where it pays.

use crate::cli::{fail, Options};
use crate::git::locate::{guard_for_children, guarded, past_wrappers, GUARD_VAR};
use crate::quote::quote;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

/// The name this process was executed under (`locate::executed_name`:
/// the file the caller ran, not argv[0], which `exec -a` sets to anything)
/// when it is not munmapq's own (`munmapq`, or a name starting with it, as
/// a versioned copy): a link to munmapq named after a program.
pub fn link_name() -> Option<OsString> {
    let name = crate::git::locate::executed_name()?;
    (!name.as_bytes().starts_with(b"munmapq")).then_some(name)
}

/// Runs the program `name` stands for with the library, as `munmapq --
/// PROGRAM ARGS...` would: the settings checked first, the program
/// exec'd.
pub fn run(name: &OsStr, args: &[OsString]) -> ExitCode {
    let shown = quote(name);
    if guarded().len() >= crate::git::wrap::MAX_WRAPPERS {
        return fail(
            &format!("{shown}: munmapq links in a row ({GUARD_VAR}): a loop; check PATH"),
            126,
        );
    }
    let Some(program) = past_wrappers(name) else {
        return fail(
            &format!(
                "{shown}: command not found (munmapq linked as {shown} runs the next {shown} in PATH, which has none besides munmapq)"
            ),
            127,
        );
    };
    if let Err(e) = crate::cli::check_environment() {
        return e.report();
    }
    // A munmapq linked further along PATH under the same name (or as a
    // git this program runs) skips this one; the library is already in
    // what it inherits.
    std::env::set_var(GUARD_VAR, guard_for_children());
    let mut command = vec![program.into_os_string()];
    command.extend(args.iter().cloned());
    crate::run::run(
        Options {
            lib: None,
            stats: None,
            stats_out: None,
            quiet: false,
            vars: Vec::new(),
            command,
        },
        crate::git::check::stats_advice,
    )
}
